"""What the monitor watches, read from the registry: one ``WatchTarget`` per registered deployment.

- γ and the per-batch schedule from the deployment row (``num_speculative_tokens``,
  ``engine_config``);
- the recorded baseline (``HistoryStore.baselines``);
- the fingerprint the draft was trained against (the draft's ``trained_against_fingerprint``);
- floors from the validation profile: ``alpha_floor`` = the profile's per-token α P5 floor,
  ``break_even_alpha`` = the α below which the profile's performance model predicts speedup < 1 at
  this γ (``specops.checks.thresholds``);
- ``restart_allowed`` from the deployment's labels (``restart_allowed: true``) — restart probes never
  run on a deployment that did not opt in.

``LiveFingerprints`` answers "which target does this deployment serve now": the fingerprint of the
local folder the engine loads (re-computed only when a file in it changed: size or mtime), else the
fingerprint recorded when it was deployed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from specops.drift.store import HistoryStore
from specops.drift.watch import WatchTarget

TRUE = (True, "true", "1", "yes", "on")


def served_model_path(dep) -> str | None:
    """The target the engine loads: engine_config['model'], else the argv's --model / positional."""
    cfg = dep.engine_config or {}
    if cfg.get("model"):
        return str(cfg["model"])
    argv = dep.argv_redacted or []
    for i, a in enumerate(argv):
        if a == "--model" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--model="):
            return a.split("=", 1)[1]
    if "serve" in argv:
        i = argv.index("serve")
        if i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            return argv[i + 1]
    return None


def _signature(folder: Path) -> tuple | None:
    try:
        return tuple(sorted((p.name, st.st_size, st.st_mtime_ns)
                            for p in folder.iterdir() if p.is_file() for st in (p.stat(),)))
    except OSError:
        return None


class LiveFingerprints:
    """Fingerprints of local model folders, cached on the folder's file sizes and mtimes."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[tuple, str | None]] = {}

    def folder(self, path: str) -> str | None:
        folder = Path(path).expanduser()
        if not folder.is_dir():
            return None
        sig = _signature(folder)
        hit = self._cache.get(str(folder))
        if hit is not None and hit[0] == sig:
            return hit[1]
        from specops.registry.fingerprint import inspect_artifact

        try:
            fp = inspect_artifact(str(folder))["fingerprint"]
        except Exception:  # noqa: BLE001 - an unreadable folder: fall back to what was recorded
            fp = None
        self._cache[str(folder)] = (sig, fp)
        return fp

    def of(self, dep) -> tuple[str | None, str]:
        """(fingerprint, where it came from) of the target ``dep`` serves."""
        path = served_model_path(dep)
        if path and os.path.isdir(os.path.expanduser(path)):
            fp = self.folder(path)
            if fp:
                return fp, f"folder {path} (re-fingerprinted)"
        if dep.target_fingerprint:
            return dep.target_fingerprint, "recorded at deploy"
        return None, "unknown"


@dataclass
class Floors:
    """Per-token α floor and break-even from a validation profile."""

    alpha_floor: float | None
    draft_cost_ratio: float | None

    def break_even(self, gamma: int) -> float | None:
        if self.draft_cost_ratio is None or gamma <= 0:
            return None
        from specops.checks.thresholds import leviathan_speedup, performance_floor

        return performance_floor(leviathan_speedup(self.draft_cost_ratio), gamma)


def profile_floors(profile: str | None) -> Floors:
    if not profile:
        return Floors(None, None)
    from specops.checks.playbook import get_profile

    p = get_profile(profile)
    return Floors(alpha_floor=p.acceptance_p5_min, draft_cost_ratio=p.draft_cost_ratio)


def _schedule(dep) -> list[tuple[int, int, int]] | None:
    cfg = dep.engine_config or {}
    sched = cfg.get("num_speculative_tokens_per_batch_size") or (cfg.get("speculative_config") or {}).get(
        "num_speculative_tokens_per_batch_size")
    return [tuple(r) for r in sched] if sched else None


LIVE = ("running", "starting", "adopted")


def _spec_config(dep) -> dict | None:
    from specops.checks.sources import speculative_config

    return speculative_config(dep)


def method_of(dep) -> str | None:
    """The registered method, else the one in the recorded --speculative-config (an engine adopted or
    registered without --method still says what it runs); "none" when its argv has no speculation."""
    if dep.method:
        return dep.method
    sc = _spec_config(dep)
    if sc is not None:
        return str(sc["method"]) if sc.get("method") else None
    return "none" if dep.argv_redacted else None


def speculating(dep) -> bool:
    method = method_of(dep)
    return bool(method) and method != "none" and dep.status in LIVE


def _argv_gamma(dep) -> int | None:
    k = (_spec_config(dep) or {}).get("num_speculative_tokens")
    return k if isinstance(k, int) and 0 < k <= 64 else None


def spec_expectations(name: str, reg):
    """The ``expectations`` block of the deployment's saved spec (None: no saved spec, or none in it)."""
    from specops.engines.manage import saved_spec

    try:
        found = saved_spec(name, reg)
    except (ValueError, OSError):
        return None
    return getattr(found[0], "expectations", None) if found else None


def spec_capacity(name: str, reg):
    """The ``capacity`` block of the deployment's saved spec (None: no saved spec, or none in it; issue 44)."""
    from specops.engines.manage import saved_spec

    try:
        found = saved_spec(name, reg)
    except (ValueError, OSError):
        return None
    return getattr(found[0], "capacity", None) if found else None


def spec_break_even(name: str, reg, gamma: int) -> float | None:
    """The per-token α below which this deployment is slower than without speculation, from the
    ``expectations`` its spec carries (``specops recommend -o deployment`` writes the break-even
    accepted/drafted rate at its γ: converted here to α). None without a saved spec or expectations: the
    validation profile's estimate is used then."""
    if gamma <= 0:
        return None
    from specops.speculation import alpha_from_rate

    exp = spec_expectations(name, reg)
    return None if exp is None else alpha_from_rate(exp.break_even_acceptance_rate, gamma)


def not_watched_reason(dep) -> str | None:
    """Why a registered deployment is deliberately not watched (None: it should be)."""
    if dep.status not in LIVE:
        return f"status {dep.status}: nothing to watch until it runs again"
    if method_of(dep) == "none":
        return "runs without speculation: no acceptance to watch"
    return None


def watch_targets(reg, *, floors: Floors | None = None, store: HistoryStore | None = None,
                  names: list[str] | None = None, skipped: dict[str, str] | None = None,
                  ignored: dict[str, str] | None = None) -> tuple[list[WatchTarget], dict]:
    """WatchTargets for the registered deployments that speculate (or ``names``), and their rows. Every
    other row is accounted for: one that should be watched but cannot goes into ``skipped`` (name -> why,
    with the fix: unseen), one that is deliberately not watched (stopped, no speculation) into
    ``ignored`` (name -> why)."""
    floors = floors or Floors(None, None)
    store = store or HistoryStore(reg)
    rows = reg.list_deployments()
    skipped = {} if skipped is None else skipped
    if names is not None and (missing := sorted(set(names) - {d.name for d in rows})):
        from specops.errors import unknown

        raise unknown("deployment", missing[0], [d.name for d in rows],
                      fix="name a registered deployment (`specops deployment list`), or drop -d to watch all")
    ignored = {} if ignored is None else ignored
    deps = {d.name: d for d in rows if (names is None and speculating(d)) or (names is not None and d.name in names)}
    for d in rows:
        if d.name in deps or (names is not None and d.name not in names):
            continue
        if (why := not_watched_reason(d)) is not None:
            ignored[d.name] = why
        else:  # live, and neither the row nor its argv says what it runs
            skipped[d.name] = (f"registered without a method and its recorded argv does not say one; register it "
                               f"with `specops deployment register {d.name} --method METHOD --endpoint URL ...`")
    baselines = store.baselines(list(deps))
    drafts = {}
    for d in deps.values():
        if d.draft_ref and d.draft_ref not in drafts:
            try:
                drafts[d.draft_ref] = reg.get_draft(d.draft_ref)
            except Exception:  # noqa: BLE001 - a draft given as a hub id or path, not registered
                drafts[d.draft_ref] = None
    from specops.drift.collapse_steps import launch_record

    targets = []
    for name, d in sorted(deps.items()):
        draft = drafts.get(d.draft_ref) if d.draft_ref else None
        gamma = d.num_speculative_tokens or _argv_gamma(d) or 0
        be = spec_break_even(name, reg, gamma)
        exp = spec_expectations(name, reg) if gamma > 0 else None
        rec = launch_record(d)  # the recorded launch: method, KV connector, adaptive verification
        try:
            targets.append(WatchTarget(
                method=rec["method"], draft_method=draft.method if draft is not None else None,
                kv_connector=rec["kv_connector"], adaptive_verification=rec["adaptive_verification"],
                name=name, gamma=gamma, schedule=_schedule(d), baseline=baselines.get(name),
                alpha_floor=floors.alpha_floor, break_even_alpha=be if be is not None else floors.break_even(gamma),
                trained_against=draft.trained_against_fingerprint if draft is not None else None,
                restart_allowed=(d.labels or {}).get("restart_allowed") in TRUE,
                expected_acceptance_rate=exp.acceptance_rate if exp else None,
                break_even_acceptance_rate=exp.break_even_acceptance_rate if exp else None,
                expected_speedup=exp.speedup if exp else None, capacity=spec_capacity(name, reg)))
        except Exception as exc:  # noqa: BLE001 - one bad row is reported and skipped, never fatal for the fleet
            msg = getattr(exc, "message", None) or str(exc).splitlines()[0][:200]
            skipped[name] = (f"its registry row cannot be watched ({msg}); fix it with `specops deployment "
                             f"register {name} --endpoint URL ...` or `specops deployment remove {name}`")
    for name in skipped:
        deps.pop(name, None)
    return targets, deps
