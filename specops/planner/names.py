"""GPU names checked before the planner loads: a mistyped ``--gpu`` is refused after reading only
playbooks/catalogs/gpus.yaml (no pydantic models, no performance model). The full catalog
(:mod:`specops.planner.catalog`) uses the same key and the same messages."""

from __future__ import annotations

from functools import lru_cache

from specops.errors import InputError, unknown

_GPU_PREFIXES = ("nvidia ", "amd instinct ", "amd ", "tesla ", "geforce ")


def gpu_key(name: str) -> str:
    """How GPU names compare: case-insensitive, vendor words dropped (nvidia-smi's "NVIDIA H100 80GB HBM3",
    rocm-smi's "AMD Instinct MI300X"), spaces and "_" as "-"."""
    key = " ".join(str(name).strip().lower().split())
    changed = True
    while changed:
        changed = False
        for p in _GPU_PREFIXES:
            if key.startswith(p):
                key, changed = key[len(p):], True
    return "-".join(key.replace("_", " ").replace("-", " ").split())


def gpu_keys(names: list[str]) -> set[str]:
    """The keys one GPU entry answers to (its name and aliases, with and without "-")."""
    return {k for n in names for k in (gpu_key(n), gpu_key(n).replace("-", ""))}


def refuse_gpu(name: str, index: dict[str, str], names: list[str]) -> None:
    """Raise the error for a name no entry answers to: ambiguous (a prefix of several) or unknown.
    ``index``: key → GPU name; ``names``: the catalog's GPU names in order."""
    key = gpu_key(name)
    several = sorted({g for k, g in index.items() if k.startswith(key + "-")})
    if len(several) > 1:
        raise InputError(f'GPU "{name}" is ambiguous: it may be {", ".join(several)}',
                         "use --gpu " + " or --gpu ".join(several))
    raise unknown("GPU", name, names, fix="use one of: " + ", ".join(names))


@lru_cache(maxsize=4)
def _shipped_index(path: str) -> tuple[dict[str, str], list[str]]:
    from specops.planner.diskcache import cached

    return cached("gpu-names", lambda: _read_index(path))


def _read_index(path: str) -> tuple[dict[str, str], list[str]]:
    import yaml

    with open(path, encoding="utf-8") as f:
        data = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - safe loaders only
    index: dict[str, str] = {}
    names: list[str] = []
    for g in (data or {}).get("gpus") or []:
        if not isinstance(g, dict) or "name" not in g:
            continue
        names.append(str(g["name"]))
        for k in gpu_keys([str(g["name"]), *[str(a) for a in [*(g.get("aliases") or []), *(g.get("smi_names") or [])]]]):
            index.setdefault(k, str(g["name"]))
    return index, names


def gpu_names_for_help() -> str:
    """The catalog's GPU names, comma-separated, for ``--help`` (read with a regular expression from the entries'
    ``- name:`` lines, without the YAML parser: ``specops --help`` builds every command's help). The full loader
    reads the same names (tests/planner compares them)."""
    import re

    from specops.playbooks import playbook_path

    try:
        text = playbook_path("catalogs", "gpus.yaml").read_text(encoding="utf-8")
    except OSError:
        return "see playbooks/catalogs/gpus.yaml"
    return ", ".join(re.findall(r"^  - name: *\"?([^\"\s#]+)", text, flags=re.M))


def check_gpu_name(name: str) -> None:
    """Refuse a GPU name the shipped catalog does not know (an unreadable file is left to the full loader,
    which says where it is wrong)."""
    from specops.playbooks import playbook_path

    try:
        index, names = _shipped_index(str(playbook_path("catalogs", "gpus.yaml")))
    except Exception:  # noqa: BLE001 - the careful reader reports it with its line
        return
    key = gpu_key(name)
    if not names or key in index or key.replace("-", "") in index:
        return
    refuse_gpu(name, index, names)
