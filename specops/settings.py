"""Where state lives and how settings resolve.

Precedence for every setting: command-line flag, then ``SPECOPS_<NAME>`` environment variable,
then ``$SPECOPS_HOME/config.yaml``, then the built-in default.

- ``SPECOPS_HOME``: defaults to ``$XDG_DATA_HOME/specops`` (``~/.local/share/specops``).
- Registry: ``$SPECOPS_HOME/specops.db`` unless ``SPECOPS_DB`` (any SQLAlchemy URL) is set.
- Per-deployment state: ``$SPECOPS_HOME/deployments/<name>/``.
- Caches (built test models, compile caches): ``$SPECOPS_HOME/cache/``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def specops_home() -> Path:
    env = os.environ.get("SPECOPS_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "specops"


def cache_dir() -> Path:
    return specops_home() / "cache"


def deployments_dir() -> Path:
    return specops_home() / "deployments"


def deployment_dir(name: str) -> Path:
    """``$SPECOPS_HOME/deployments/<name>/``; a name that would leave that folder (``..``, ``/``, an
    absolute path, control characters, too long for a file name) is an InputError, never a path."""
    check_path_component(name, "deployment name")
    return deployments_dir() / name


def check_path_component(name: object, what: str = "name") -> str:
    """``name`` when it is safe as one file-name component inside a folder; else an InputError."""
    ok = (isinstance(name, str) and 0 < len(name) <= 200 and name not in (".", "..")
          and not any(c in name for c in "/\\") and all(c.isprintable() for c in name))
    if not ok:
        from specops.errors import InputError

        shown = (name[:60].encode("unicode_escape").decode() + ("..." if len(name) > 60 else "")
                 if isinstance(name, str) else repr(name))
        raise InputError(f'{what} "{shown}" cannot name a file or folder (no "/", "..", control characters; '
                         "at most 200 characters)", "use lowercase letters, digits and \"-\"")
    return name  # type: ignore[return-value]


KNOWN_SETTINGS = ("db", "gpu", "interval", "leader_lease", "leader_lease_seconds", "metrics_addr", "metrics_port",
                  "namespace", "pod_name", "policy", "profile", "prometheus_ca_file", "prometheus_insecure",
                  "prometheus_token", "prometheus_token_file", "prometheus_url", "retrain_data", "vllm_version")
"""Every name :func:`setting` is asked for (tests/test_settings.py checks the code against it). A key
in config.yaml outside this list is refused with "did you mean" (a typo would otherwise be ignored)."""


TEXT_SETTINGS = ("db", "gpu", "metrics_addr", "namespace", "pod_name", "policy", "profile", "prometheus_ca_file",
                 "prometheus_token_file", "prometheus_url", "retrain_data", "vllm_version")
"""Settings whose config.yaml value must be text. YAML reads `vllm_version: 0.30` as the float 0.3 (and
`gpu: 4090` as a number): such a value is refused with "quote it", never read as something else."""


def _typed(key: str, value: Any, path: Path, lines: dict | None = None) -> Any:
    if key in TEXT_SETTINGS and value is not None and not isinstance(value, str):
        from specops.errors import ConfigFileError

        kind = type(value).__name__
        example = "0.33.0" if key == "vllm_version" else str(value)
        raise ConfigFileError(f"{key}: {value!r} is read as a {kind}, not text (YAML turns 0.30 into 0.3)",
                              f'quote it: {key}: "{example}"', path=str(path))
    return value


def _config_file_values() -> dict[str, Any]:
    path = specops_home() / "config.yaml"
    if not path.is_file():
        return {}
    from specops.yamlfile import load_yaml

    data = load_yaml(path)
    if not isinstance(data, dict):
        from specops.errors import ConfigFileError

        raise ConfigFileError("config.yaml must be a mapping of setting names to values",
                              "write `key: value` lines, e.g. `prometheus_url: http://...`",
                              path=str(path))
    values = {str(k).lower().replace("-", "_"): v for k, v in data.items()}
    for key in values:
        if key not in KNOWN_SETTINGS:
            from specops.errors import ConfigFileError, did_you_mean
            from specops.yamlfile import parse_yaml_text

            _, lines = parse_yaml_text(path.read_text(encoding="utf-8"), str(path))
            line = next((n for k, n in lines.items() if len(k) == 1 and str(k[0]).lower().replace("-", "_") == key),
                        None)
            raise ConfigFileError(f'unknown setting "{key}".{did_you_mean(key, KNOWN_SETTINGS)}',
                                  "remove it or use one of: " + ", ".join(KNOWN_SETTINGS), path=str(path), line=line)
    return {k: _typed(k, v, path) for k, v in values.items()}


def setting(name: str, flag_value: Any = None, default: Any = None) -> Any:
    """Resolve one setting: flag > SPECOPS_<NAME> > config.yaml > default."""
    if flag_value is not None:
        return flag_value
    env = os.environ.get("SPECOPS_" + name.upper())
    if env is not None and env != "":
        return env
    values = _config_file_values()
    if name.lower() in values and values[name.lower()] is not None:
        return values[name.lower()]
    return default


def database_url(flag_value: str | None = None) -> str:
    """The registry URL: --db, SPECOPS_DB, config.yaml `db`, else SQLite in SPECOPS_HOME."""
    url = setting("db", flag_value)
    if url:
        url = str(url)
        if "://" not in url:  # a plain path means an existing SQLite file; a new one is named by URL
            path = Path(url).expanduser()
            try:
                exists = path.is_file()
            except (OSError, ValueError):  # too long, NUL byte
                exists = False
            if not exists:
                from specops.errors import InputError

                shown = url[:120].encode("unicode_escape").decode()
                raise InputError(f'--db "{shown}" is neither a database URL nor an existing registry file',
                                 "give a URL (sqlite:////path/specops.db creates one, postgresql+psycopg://"
                                 "user@host/db) or the path of an existing SQLite registry")
            url = "sqlite:///" + str(path.resolve())
        return url
    return "sqlite:///" + str(specops_home() / "specops.db")


# --- what `specops config show` reports ----------------------------------------------------------

SETTING_INFO: dict[str, tuple[str | None, str | None, str]] = {
    "db": ("--db", "sqlite:///$SPECOPS_HOME/specops.db", "the registry (any SQLAlchemy URL, or an existing SQLite file)"),
    "gpu": ("--gpu", None, "recommend's GPU when --gpu is not given"),
    "interval": ("--interval", "60", "seconds between monitor cycles"),
    "leader_lease": (None, None, "the Kubernetes Lease the monitor must hold to act (unset: no leader election)"),
    "leader_lease_seconds": (None, "15", "that Lease's duration"),
    "metrics_addr": (None, "127.0.0.1 (0.0.0.0 in a pod)", "address of the monitor's own /metrics"),
    "metrics_port": ("--metrics-port", None, "port of the monitor's own /metrics (unset: not served)"),
    "namespace": (None, "the pod's service-account namespace", "namespace of the leader Lease"),
    "pod_name": (None, "host name + a random suffix", "identity that holds the leader Lease"),
    "policy": ("--policy", "default", "the monitor's drift policy"),
    "profile": ("--profile", None, "validation profile of the monitor and the checks"),
    "prometheus_ca_file": (None, None, "CA bundle for an https Prometheus"),
    "prometheus_insecure": (None, "false", "skip TLS verification of Prometheus"),
    "prometheus_token": (None, None, "bearer token for Prometheus (shown redacted)"),
    "prometheus_token_file": (None, None, "file holding that token"),
    "prometheus_url": ("--prometheus-url", None, "Prometheus that validate, bench and the monitor query"),
    "retrain_data": (None, None, "prompts the monitor's retrain action trains on"),
    "vllm_version": ("--vllm-version", None, "vLLM release recommend renders for"),  # default: DEFAULT_VLLM_VERSION
}
"""Per setting in KNOWN_SETTINGS: the command-line flag that overrides it (None: environment or file
only), the default the code uses when nothing sets it (None: unset), and what it is."""

SECRET_SETTINGS = ("prometheus_token",)


def explain_settings() -> dict[str, Any]:
    """Every known setting, its value and where it came from (``SPECOPS_<NAME>``, config.yaml, the
    default, or unset), the way :func:`setting` resolves it when no flag is given. A secret's value is
    ``<redacted>``. A command's flag (``flag``) wins over all of these for that command."""
    from specops.capabilities import DEFAULT_VLLM_VERSION

    config = specops_home() / "config.yaml"
    values = _config_file_values()
    rows = []
    for name in KNOWN_SETTINGS:
        flag, default, meaning = SETTING_INFO[name]
        if name == "vllm_version":
            default = DEFAULT_VLLM_VERSION
        env_name = "SPECOPS_" + name.upper()
        env = os.environ.get(env_name)
        if env not in (None, ""):
            value, source = env, env_name
        elif values.get(name) is not None:
            value, source = values[name], "config.yaml"
        elif name == "db":
            value, source = database_url(), "default"
        elif default is not None:
            value, source = default, "default"
        else:
            value, source = None, "unset"
        if name in SECRET_SETTINGS and value is not None:
            value = "<redacted>"
        rows.append({"name": name, "value": value, "source": source, "flag": flag, "env": env_name,
                     "default": default, "meaning": meaning})
    home_env = os.environ.get("SPECOPS_HOME")
    return {"home": str(specops_home()), "home_source": "SPECOPS_HOME" if home_env else "default",
            "config_file": str(config), "config_file_exists": config.is_file(), "settings": rows}
