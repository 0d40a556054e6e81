"""The known-bug rows of playbooks/vllm/capabilities.csv applied to one launch.

One place turns a :class:`~specops.engines.argv.LaunchConfig` into the facts the rows test
(:data:`specops.capabilities.WHEN_KEYS`), and applies what the rows say: a ``refuse`` row that applies
stops the launch (CapabilityError), a ``mitigate`` row adds its mitigation flags, a ``warn`` row
warns. Every finding names the issue and the affected versions. A row whose conditions are partly
unknown (the target's architecture, say) and otherwise match *may apply*: it is reported as such,
never silently skipped and never mitigated blindly.

``render_args`` (argv.py) applies the mitigations, so recommend's argv, deploy's argv and the
Kubernetes manifest all carry them; recommend, deploy and the gate show the findings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from specops.capabilities import Capability, CapabilityTable, default_table, parse_version
from specops.errors import CapabilityError

if TYPE_CHECKING:
    from specops.engines.argv import LaunchConfig

DRAFT_KV = "speculative_config.kv_cache_dtype="

# Where a mitigation goes in a deployment spec (the gate's "To fix:").
SPEC_FIX = {
    "--enforce-eager": "set engine.enforce_eager: true",
    "--no-enable-prefix-caching": "add --no-enable-prefix-caching to engine.extra_args",
}


@dataclass(frozen=True)
class BugFinding:
    """One known-bug row that applies (or may apply) to a launch."""

    row: Capability
    status: Literal["applies", "may apply"]
    missing: tuple[str, ...] = ()   # mitigation flags the launch lacked
    unknown: tuple[str, ...] = ()   # facts the row tests that nobody knows

    def message(self) -> str:
        r = self.row
        head = f"known bug {r.issue()} (vLLM {r.span()})" if "#" in r.name else f"known vLLM bug ({r.span()})"
        if self.status == "may apply":
            what = {"refuse": "would refuse this launch", "mitigate": f"would need {'; '.join(r.mitigation)}",
                    "warn": "may affect this launch"}[r.effect or "warn"]
            return (f"{head} may apply ({', '.join(self.unknown)} unknown) and {what}: {r.name}. "
                    f"{r.notes}".strip())
        if r.effect == "mitigate":
            done = (f"mitigated with {'; '.join(self.missing)}" if self.missing else
                    f"mitigation {'; '.join(r.mitigation)} already in place")
            return f"{head}: {r.name}; {done}. {r.notes}".strip()
        return f"{head}: {r.name}. {r.notes}".strip()

    def warning(self) -> str:
        """The finding as one line for a plan, a dry run or a spec's comments: the issue, what goes wrong, and
        the fix (the row's workaround or the mitigation applied); the row's evidence stays in the table."""
        import re

        r = self.row
        issue = r.issue() if "#" in r.name else None
        head = f"known bug {issue}" if issue else "known vLLM bug"
        name = re.sub(r"\s*\((?:vllm)?#\d+\)\s*$", "", r.name.strip()) if issue else r.name.strip()
        if self.status == "may apply":
            return f"{head} (vLLM {r.span()}) may apply ({', '.join(self.unknown)} unknown): {name}"
        if r.effect == "mitigate":
            done = (f"mitigated with {'; '.join(self.missing)}" if self.missing else
                    f"mitigation {'; '.join(r.mitigation)} already in place")
            return f"{head} (vLLM {r.span()}): {name}; {done}"
        work = re.search(r"Workaround:\s*(.+?)\.(?=\s+[A-Z]|\s*$)", r.notes or "")
        return f"{head} (vLLM {r.span()}): {name}" + (f". To fix: {work.group(1)}" if work else "")

    def spec_fix(self) -> str:
        return "; ".join(spec_fix(m) for m in self.missing)


@dataclass
class BugReport:
    """The launch after mitigations, and what was found."""

    cfg: LaunchConfig
    facts: dict[str, str | None]
    findings: list[BugFinding] = field(default_factory=list)

    def warnings(self) -> list[str]:
        """One line per finding (:meth:`BugFinding.warning`)."""
        return [f.warning() for f in self.findings]

    def mitigated(self) -> list[BugFinding]:
        return [f for f in self.findings if f.status == "applies" and f.missing]


def spec_fix(mitigation: str) -> str:
    if mitigation.startswith(DRAFT_KV):
        return f"set speculative.draft_kv_cache_dtype: {mitigation[len(DRAFT_KV):]}"
    return SPEC_FIX.get(mitigation, f"add {mitigation} to engine.extra_args")


# --- facts ---------------------------------------------------------------------------------------

def _last_value(flags: list[str], *names: str) -> str | None:
    value = None
    for i, a in enumerate(flags):
        key, eq, inline = a.partition("=")
        if key in names:
            value = inline if eq else (flags[i + 1] if i + 1 < len(flags) else None)
    return value


def launch_facts(cfg: LaunchConfig, flags: list[str] | None = None, *, vocab: str | None = None,
                 table: CapabilityTable | None = None) -> dict[str, str | None]:
    """The WHEN_KEYS facts of a launch, from its rendered flags (None: not known)."""
    from specops.engines.argv import _flags

    flags = flags if flags is not None else _flags(cfg, table or default_table())
    version = parse_version(cfg.vllm_version)
    method = cfg.vllm_method() or "none"
    schedule = "on" if cfg.num_speculative_tokens_per_batch_size and method != "none" else "off"
    arch = cfg.architecture
    if "--no-enable-prefix-caching" in flags:
        prefix = "off"
    elif "--enable-prefix-caching" in flags:
        prefix = "on"
    elif version < (0, 8, 0):
        prefix = "off"          # V0: opt-in
    elif arch == "hybrid":
        prefix = "on" if version >= (0, 28, 0) else "off"   # 0.28.0 turned it on for hybrid models
    elif arch is None and version < (0, 28, 0):
        prefix = None
    else:
        prefix = "on"
    from specops.engines.adaptive import default_runner

    runner = default_runner(method, version, parallel_drafting=bool(cfg.parallel_drafting))
    if "--enforce-eager" in flags:
        graphs: str | None = "none"
    else:
        graphs = "full"
        comp = _last_value(flags, "--compilation-config", "-cc")
        if comp:
            from specops.errors import ConfigFileError
            from specops.jsonfile import parse_json_text

            try:
                parsed = parse_json_text(comp, "--compilation-config")
            except ConfigFileError:
                parsed = None
            mode = str(parsed.get("cudagraph_mode", "")).upper() if isinstance(parsed, dict) else ""
            graphs = "none" if mode == "NONE" else "piecewise" if mode == "PIECEWISE" else graphs
        if schedule == "on" and runner == "v1":
            graphs = "piecewise"   # vllm/config/vllm.py forces PIECEWISE with a schedule on V1
    dp = _last_value(flags, "--data-parallel-size", "-dp")
    kv = _last_value(flags, "--kv-cache-dtype") or "auto"
    draft_kv = cfg.draft_kv_cache_dtype
    return {
        "method": method, "kv_dtype": kv, "architecture": arch, "prefix_caching": prefix, "cuda_graphs": graphs,
        "data_parallel": ">1" if dp and dp.isdigit() and int(dp) > 1 else "1",
        "model_runner": runner,
        "kv_connector": "any" if _last_value(flags, "--kv-transfer-config") else "none",
        "vocab": vocab, "schedule": schedule,
        "draft_kv_dtype": "inherit" if draft_kv is None else ("auto" if draft_kv == "auto" else "other"),
        "adaptive_verification": "on" if cfg.adaptive_verification else "off",
        "lora": "on" if "--enable-lora" in flags else "off",
        "pipeline_parallel": ">1" if (pp := _last_value(flags, "--pipeline-parallel-size", "-pp")) and pp.isdigit()
        and int(pp) > 1 else "1",
    }


def _has(cfg: LaunchConfig, flags: list[str], mitigation: str) -> bool:
    if mitigation.startswith(DRAFT_KV):
        return cfg.draft_kv_cache_dtype == mitigation[len(DRAFT_KV):]
    return mitigation in flags


def _apply(cfg: LaunchConfig, mitigation: str) -> LaunchConfig:
    if mitigation.startswith(DRAFT_KV):
        return cfg.model_copy(update={"draft_kv_cache_dtype": mitigation[len(DRAFT_KV):]})
    if mitigation == "--enforce-eager":
        return cfg.model_copy(update={"enforce_eager": True})
    extra = [a for a in cfg.extra_args if not (mitigation == "--no-enable-prefix-caching"
                                               and a == "--enable-prefix-caching")]
    return cfg.model_copy(update={"extra_args": [*extra, mitigation]})


def audit(cfg: LaunchConfig, flags: list[str] | None = None, table: CapabilityTable | None = None, *,
          vocab: str | None = None) -> tuple[dict[str, str | None], list[BugFinding]]:
    """The facts of a launch and the rows that apply or may apply, nothing changed or raised;
    ``missing``: the mitigations the launch (its ``flags``, default: rendered) lacks."""
    from specops.engines.argv import _flags

    table = table or default_table()
    flags = flags if flags is not None else _flags(cfg, table)
    facts = launch_facts(cfg, flags, vocab=vocab, table=table)
    out = []
    for row in table.bugs(parse_version(cfg.vllm_version), facts=facts):
        verdict = row.applies(facts)
        unknown = tuple(k for k, _ in row.when if facts.get(k) is None)
        if verdict is None:
            if len(unknown) < len(row.when):  # all unknown: the row says nothing about this launch
                out.append(BugFinding(row, "may apply", unknown=unknown))
            continue
        missing = tuple(m for m in row.mitigation if not _has(cfg, flags, m)) if row.effect == "mitigate" else ()
        out.append(BugFinding(row, "applies", missing=missing))
    return facts, out


def known_bugs(cfg: LaunchConfig, table: CapabilityTable | None = None, *, vocab: str | None = None) -> BugReport:
    """Apply the known-bug rows to ``cfg``: refuse (CapabilityError), mitigate, warn, or "may apply"."""
    table = table or default_table()
    facts, findings = audit(cfg, table=table, vocab=vocab)
    report = BugReport(cfg=cfg, facts=facts, findings=findings)
    for f in findings:
        row = f.row
        if f.status == "applies" and row.effect == "refuse":
            raise CapabilityError(f"known bug {row.issue()} (vLLM {row.span()}) refuses this launch on vLLM "
                                  f"{cfg.vllm_version}: {row.name}",
                                  f"{row.notes.split('. ')[0].rstrip('.') or 'change the method, KV dtype or version'}"
                                  " (playbooks/vllm/capabilities.csv)")
        for m in f.missing:
            report.cfg = _apply(report.cfg, m)
    return report


def spec_findings(cfg: LaunchConfig, table: CapabilityTable | None = None) -> tuple[str, str, str | None]:
    """The gate's verdict on a launch as written (before mitigations): (status pass|warn|fail|error, message,
    fix)."""
    from specops.errors import SpecopsError

    try:
        _facts, findings = audit(cfg, table=table)
    except SpecopsError as exc:
        return "fail", exc.message, exc.fix
    refused = [f for f in findings if f.status == "applies" and f.row.effect == "refuse"]
    lacking = [f for f in findings if f.status == "applies" and f.missing]
    blind = [f for f in findings if f.status == "may apply" and f.row.effect in ("refuse", "mitigate")]
    if refused:
        f = refused[0]
        return "fail", f.message(), (f.row.notes.split(". ")[0] or "change the method, KV dtype or version")
    if lacking:
        return ("fail", "; ".join(f"the spec lacks {', '.join(f.missing)} that known bug {f.row.issue()} "
                                  f"(vLLM {f.row.span()}) requires: {f.row.name}" for f in lacking),
                "; ".join(f.spec_fix() for f in lacking))
    if blind:
        keys = sorted({k for f in blind for k in f.unknown})
        fix = ("set target.architecture: dense|moe|hybrid|sliding_window in the spec" if "architecture" in keys
               else f"state {', '.join(keys)} explicitly in engine.extra_args")
        return ("error", "could not evaluate: " + "; ".join(f.message().split(". ")[0] for f in blind), fix)
    return (*handled_or_watched(findings, "no known bug applies"), None)


def handled_or_watched(findings: list[BugFinding], none: str) -> tuple[str, str]:
    """The verdict when no row refuses, lacks a mitigation or cannot be told: "pass" with the rows whose
    mitigation is in place ("known bugs handled"), or "warn" when warning-only rows apply or may apply
    (nothing to set; they are named to watch for, never counted as handled)."""
    handled = [f for f in findings if f.status == "applies" and f.row.effect == "mitigate"]
    watch = [f for f in findings if f not in handled]
    parts = ([f"known bugs handled: {'; '.join(_short(f) for f in handled)}"] if handled else []) + \
            ([f"warning-only known bugs to watch for (nothing to set): {'; '.join(_short(f) for f in watch)}"]
             if watch else [])
    return ("warn" if watch else "pass"), (" | ".join(parts) or none)


def _short(f: BugFinding) -> str:
    """A finding's first sentence, without a trailing "(vllm#N)" that repeats the issue its head names."""
    import re

    text = f.message().split(". ")[0]
    issue = f.row.issue()
    if issue and text.count(issue) > 1:
        text = re.sub(rf"\s*\({re.escape(issue)}[^)]*\)\s*$", "", text)
    return text


# --- the target's architecture (config.json of a folder or of the Hugging Face cache) --------------

HYBRID_TYPES = ("qwen3_next", "qwen3_5", "qwen3_5_moe", "jamba", "bamba", "nemotron_h", "falcon_h1",
                "granitemoehybrid", "zamba2", "plamo2", "lfm2", "mamba", "mamba2", "falcon_mamba", "minimax_m1")
HYBRID_KEYS = ("mamba_d_state", "ssm_state_size", "mamba_expand", "linear_num_value_heads", "linear_key_head_dim",
               "hybrid_override_pattern", "layers_block_type", "attn_layer_indices", "full_attention_interval")


def architecture_of_config(config: dict) -> str:
    """hybrid (Mamba/GDN/linear-attention layers), sliding_window, moe or dense, from a config.json."""
    inner = config.get("text_config")
    c = {**config, **(inner if isinstance(inner, dict) else {})}
    types = c.get("layer_types")
    layer_types = [str(t).lower() for t in types] if isinstance(types, list) else []
    if (str(c.get("model_type", "")).lower() in HYBRID_TYPES or any(k in c for k in HYBRID_KEYS)
            or any(t in ("linear_attention", "mamba", "mamba2", "gdn", "ssm", "conv") for t in layer_types)):
        return "hybrid"
    if "sliding_attention" in layer_types or (c.get("sliding_window") and c.get("use_sliding_window", True)
                                              and layer_types):
        return "sliding_window"
    if any(c.get(k) for k in ("num_experts", "num_local_experts", "n_routed_experts")):
        return "moe"
    return "dense"


def hub_cache_dir(env: dict[str, str] | None = None) -> Path:
    """huggingface_hub's cache folder for ``env``: HF_HUB_CACHE, else HF_HOME/hub, else
    $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub."""
    env = os.environ if env is None else env
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    return hf_home(env) / "hub"


def hf_home(env: dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser()
    xdg = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "huggingface"


def cached_snapshot(hub_id: str, revision: str | None = None, env: dict[str, str] | None = None) -> Path | None:
    """The snapshot folder of ``hub_id`` in the Hugging Face cache (refs/<revision or main>), or None."""
    repo = hub_cache_dir(env) / ("models--" + hub_id.replace("/", "--"))
    rev = revision or "main"
    ref = repo / "refs" / rev
    commit = ref.read_text().strip() if ref.is_file() else rev
    snap = repo / "snapshots" / commit
    return snap if snap.is_dir() else None


def cached_revision(hub_id: str, env: dict[str, str] | None = None) -> str | None:
    """The commit the Hugging Face cache's ``refs/main`` of ``hub_id`` points at (what ``hf download`` fetched
    last), or None when the model is not in the cache or the ref is not a commit."""
    import re

    ref = hub_cache_dir(env) / ("models--" + hub_id.replace("/", "--")) / "refs" / "main"
    try:
        commit = ref.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return commit if re.fullmatch(r"[0-9a-f]{40}", commit) else None


def architecture_of_model(model: str, revision: str | None = None, env: dict[str, str] | None = None, *,
                          strict: bool = False) -> str | None:
    """The architecture of a local folder or a cached hub id; None when its config.json is not here.
    A config.json that is there but wrong is a ConfigFileError with ``strict`` (deploy, about to
    launch it) and None otherwise (a recorded deployment, judged later)."""
    from specops.errors import ConfigFileError
    from specops.modelconfig import read_model_config

    folder = Path(model).expanduser()
    cfg_path = folder / "config.json" if folder.is_dir() else None
    if cfg_path is None and "/" in model and not model.startswith(("/", ".", "~")):
        snap = cached_snapshot(model, revision, env)
        cfg_path = snap / "config.json" if snap else None
    if cfg_path is None or not cfg_path.is_file():
        return None
    try:
        return architecture_of_config(read_model_config(cfg_path.parent).data)
    except ConfigFileError:
        if strict:
            raise
        return None


# --- a deployment as recorded (registered, adopted or deployed by an older specops) ---------------

def _recorded_model(argv: list[str], engine_config: dict) -> str | None:
    if engine_config.get("model"):
        return str(engine_config["model"])
    if isinstance(engine_config.get("target"), dict) and engine_config["target"].get("model"):
        return str(engine_config["target"]["model"])
    model = _last_value(argv, "--model")
    if model is None and "serve" in argv:
        i = argv.index("serve")
        model = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("-") else None
    return model


def recorded_architecture(engine_config: dict, argv: list[str], target_source: str | None = None,
                          target_model_type: str | None = None) -> str | None:
    """The target's architecture for a recorded launch: stated (engine_config / a k8s spec's
    target.architecture), else read from the config.json of the model the engine loads or of the
    registered target (folder or Hugging Face cache); a hybrid model_type on record counts too."""
    stated = engine_config.get("architecture") or (engine_config.get("target") or {}).get("architecture")
    if stated:
        return str(stated)
    for model in (_recorded_model(argv, engine_config), target_source):
        if model and (arch := architecture_of_model(model)):
            return arch
    if target_model_type and target_model_type.lower() in HYBRID_TYPES:
        return "hybrid"
    return None


def recorded_findings(deployment: dict, *, target_source: str | None = None, target_model_type: str | None = None,
                      table: CapabilityTable | None = None) -> tuple[str, str, str | None, dict]:
    """The known-bug verdict on a deployment as it was launched (its recorded argv, engine_config and
    speculative config): (status pass|warn|fail|error, message, fix, evidence). Nothing is re-rendered:
    the recorded flags are what runs."""
    from specops.engines.argv import LaunchConfig
    from specops.errors import ConfigFileError, SpecopsError
    from specops.jsonfile import parse_json_text

    name = deployment.get("name", "?")
    argv = [str(a) for a in deployment.get("argv_redacted") or []]
    ec = deployment.get("engine_config") or {}
    version = deployment.get("vllm_version")
    sc = deployment.get("speculative_config") or {}
    try:  # what the engine was given wins over what the record says about it
        launched = parse_json_text(_last_value(argv, "--speculative-config", "-sc") or "null", "--speculative-config")
    except ConfigFileError:
        launched = None
    sc = launched if isinstance(launched, dict) else sc
    missing = [what for what, ok in (("launch argv", bool(argv)), ("vLLM version", bool(version))) if not ok]
    if missing:
        return ("error", f"could not evaluate: deployment {name} records no {' and no '.join(missing)}: the known-bug "
                "rows test the vLLM version, method, KV dtype, prefix caching and CUDA graph mode of the launch",
                "deploy it with `specops deploy SPEC` (it records both), or validate with a checklist YAML "
                "without deploy.known-bugs for an engine specops cannot see the flags of", {})
    method = sc.get("method") or deployment.get("method") or "none"
    arch = recorded_architecture(ec, argv, target_source, target_model_type)
    try:
        cfg = LaunchConfig(vllm_version=str(version), model=_recorded_model(argv, ec) or target_source or "?",
                           method=str(method), num_speculative_tokens=sc.get("num_speculative_tokens"),
                           num_speculative_tokens_per_batch_size=sc.get("num_speculative_tokens_per_batch_size"),
                           draft_kv_cache_dtype=sc.get("kv_cache_dtype") or sc.get("draft_kv_cache_dtype"),
                           adaptive_verification=bool(sc.get("enable_adaptive_verification")),
                           parallel_drafting=sc.get("parallel_drafting"), architecture=arch)
        facts, findings = audit(cfg, argv, table)
    except SpecopsError as exc:
        return "error", f"could not evaluate: {exc.message}", exc.fix, {}
    evidence = {"facts": facts, "findings": [f.message().split(". ")[0] for f in findings]}
    platform = deployment.get("platform")
    redo = (f"`specops restart {name}` (deploy renders the mitigation into the launch)" if platform == "local" else
            "`specops deploy SPEC` again (deploy renders the mitigation into the manifest)" if platform == "kubernetes"
            else "relaunch the engine with it and register the deployment again")
    refused = [f for f in findings if f.status == "applies" and f.row.effect == "refuse"]
    lacking = [f for f in findings if f.status == "applies" and f.missing]
    blind = [f for f in findings if f.status == "may apply" and f.row.effect in ("refuse", "mitigate")]
    if refused:
        f = refused[0]
        return ("fail", f"running a refused combination: {f.message()}",
                f"{f.row.notes.split('. ')[0].rstrip('.') or 'change the method, KV dtype or version'}, then {redo}",
                evidence)
    if lacking:
        flags = sorted({m for f in lacking for m in f.missing})
        return ("fail", "; ".join(f"launched without {', '.join(f.missing)} that known bug {f.row.issue()} "
                                  f"(vLLM {f.row.span()}) requires: {f.row.name}" for f in lacking),
                f"add {', '.join(flags)}: {redo}", evidence)
    if blind:
        keys = sorted({k for f in blind for k in f.unknown})
        fix = ("state the target's architecture: register the target from its folder (`specops lineage "
               "register-target PATH`) or deploy with target.architecture: dense|moe|hybrid|sliding_window"
               if "architecture" in keys else f"pass {', '.join(keys)} explicitly in the launch flags")
        return ("error", "could not evaluate: " + "; ".join(f.message().split(". ")[0] for f in blind), fix, evidence)
    return (*handled_or_watched(findings, f"no known bug applies to vLLM {version} {method}"), None, evidence)
