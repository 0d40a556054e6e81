"""Render the chosen candidate: the Plan (prediction, memory, alternatives) and the exact vLLM launch.

The argv comes from :func:`specops.engines.argv.render_argv` (console entrypoint) and
:func:`speculative_config`, which check every flag and key against the chosen vLLM release.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from specops.engines.argv import LaunchConfig, render_argv, speculative_config
from specops.planner.layout import layout
from specops.planner.perfmodel import Evaluation, break_even_rate
from specops.planner.types import (
    AcceptanceEvidence,
    Alternative,
    DecisionStep,
    GammaPoint,
    Memory,
    Plan,
    Predicted,
    VllmLaunch,
)
from specops.speculation import METHODS, needs_draft

if TYPE_CHECKING:
    from specops.engines.spec import DeploymentSpec
    from specops.planner.recommend import Context

# --quantization values vLLM applies on the fly to a 16-bit checkpoint; others need a pre-quantized one.
ONLINE_QUANT = {"fp8": "fp8"}


def _r(x: float, nd: int = 2) -> float:
    return round(float(x), nd)


def launch_config(ctx: Context, method: str, draft_id: str | None, gamma: int | None, kv: str,
                  schedule: list[tuple[int, int, int]] | None) -> LaunchConfig:
    req, model = ctx.request, ctx.model
    quant = ONLINE_QUANT.get(req.quantization or "") if model.weight_bits > 8.5 or req.quantization == "fp8" else None
    tp, pp = layout(req.gpus)
    parallel = expert_parallel_args(req)
    if req.data_parallel_size > 1:  # a rank is TP 1; vLLM drops a per-batch γ schedule with DP > 1 (0.33)
        tp, schedule = 1, None
    return LaunchConfig(
        vllm_version=req.vllm_version, model=model.id, method=method,
        draft_model=draft_id if needs_draft(method) else None,
        num_speculative_tokens=gamma if method != "none" else None,
        num_speculative_tokens_per_batch_size=schedule, kv_cache_dtype=kv,
        tensor_parallel_size=tp, pipeline_parallel_size=pp, distributed_executor_backend="ray" if pp > 1 else None,
        max_model_len=req.context_len + req.output_len,
        quantization=quant, architecture=model.kind(),
        parallel_drafting=True if req.parallel_drafting and method == "eagle3" else None,
        extra_args=parallel,
    )


EXPERT_PARALLEL_FLAGS = ("--data-parallel-size", "--enable-expert-parallel")
"""vLLM 0.33 flags (vllm/engine/arg_utils.py: --data-parallel-size/-dp, --enable-expert-parallel/-ep) a layout with
expert parallelism renders; `to_deployment` carries them into the DeploymentSpec's engine.extra_args."""


def expert_parallel_args(req) -> list[str]:
    """The launch flags of a layout with expert parallelism (issue 44): data-parallel attention ranks with the
    experts split over them, or experts split over the tensor-parallel GPUs."""
    if req.data_parallel_size > 1:
        return ["--data-parallel-size", str(req.data_parallel_size), "--enable-expert-parallel"]
    return ["--enable-expert-parallel"] if req.expert_parallel else []


def _no_range(ctx: Context, e: Evaluation) -> str:
    if e.method == "none":
        return "no speculation: the baseline itself (speedup 1 by definition)"
    return "no range was evaluated for this candidate (the decision tree has no evidence step)"


def _ranged(ev) -> dict:
    """The range, its level and width, P(gain) and the expected speedup of an Uncertainty (all None without one)."""
    if ev is None:
        return dict(speedup_low=None, speedup_high=None, range_level=None, range_width=None, p_gain=None,
                    expected_speedup=None)
    return dict(speedup_low=ev.speedup_low, speedup_high=ev.speedup_high, range_level=ev.level,
                range_width=_r(ev.width), p_gain=ev.p_gain, expected_speedup=ev.expected_speedup)


def _alternatives(ctx: Context, chosen: Evaluation) -> list[Alternative]:
    best: dict[tuple[str, str], Evaluation] = {}
    score = (lambda e: e.throughput_tok_s) if ctx.request.objective == "throughput" else (lambda e: e.speedup)
    for e in ctx.table_rows:
        key = (e.method, e.kv_dtype)
        if e is chosen:
            continue
        if key not in best or score(e) > score(best[key]):
            best[key] = e
    from specops.planner.recommend import evidence_for

    rows = sorted(best.values(), key=score, reverse=True)[:6]
    out = []
    for e in rows:
        ev = evidence_for(ctx, e)
        out.append(Alternative(method=e.method, num_speculative_tokens=e.gamma or None, kv_cache_dtype=e.kv_dtype,
                               draft=e.draft.id if e.draft and not e.draft.typical else None, speedup=_r(e.speedup),
                               **_ranged(ev), tpot_ms=_r(e.tpot_ms), throughput_tok_s=_r(e.throughput_tok_s, 1),
                               fits=e.fits))
    return out


def _gamma_curve(ctx: Context, e: Evaluation) -> list[GammaPoint] | None:
    """The chosen method's rows of the cost table at the chosen KV dtype, one per γ."""
    if e.method == "none":
        return None
    rows = sorted((r for r in ctx.table_rows if r.method == e.method and r.kv_dtype == e.kv_dtype), key=lambda r: r.gamma)
    return [GammaPoint(gamma=r.gamma, mean_acceptance_length=_r(r.tau), acceptance_rate=_r(r.acceptance_rate, 3),
                       speedup=_r(r.speedup), tpot_ms=_r(r.tpot_ms)) for r in rows] or None


def _acceptance(ctx: Context, e: Evaluation) -> AcceptanceEvidence | None:
    from specops.planner.recommend import prior_for

    prior = prior_for(ctx, e.method) if e.method != "none" else None
    est = getattr(prior, "evidence", None)
    if est is None or not e.prior_source.startswith("acceptance model"):
        return None
    lo, hi = est.tau_range(e.gamma)
    return AcceptanceEvidence(task_class=est.task_class, cell_rows=list(est.cell_rows), cell_sources=est.cell_sources,
                              method_rows=est.method_rows, task_shift=_r(est.task_shift, 3), logit_sd=_r(est.logit_sd, 3),
                              mean_acceptance_length_low=_r(lo), mean_acceptance_length_high=_r(hi), decay=_r(est.decay, 3),
                              note=est.task_note(e.method, ctx.request.task))


def _warnings(ctx: Context, e: Evaluation) -> None:
    req = ctx.request
    if ctx.model.source.startswith("estimated") or ctx.model.source.endswith("(config.json)"):
        ctx.warn(f"specops does not know {ctx.model.id} (not in playbooks/catalogs/models.yaml): its size comes from "
                 f"{ctx.model.source.removeprefix('estimated from ')} and its acceptance from other targets' rows; "
                 "measure before relying on the prediction (specops bench, specops tune)")
    if not e.fits:
        ctx.warn(f"the KV cache for batch {req.batch_size} × {req.context_len + req.output_len} tokens does not fit "
                 f"({e.memory.weights_gib + e.memory.draft_gib + e.memory.kv_gib(req.batch_size):.1f} GiB needed, "
                 f"{e.memory.available_gib:.1f} GiB usable): at most {e.memory.max_batch()} requests run at once, so the "
                 f"predictions are for batch {e.effective_batch}, not --batch-size {req.batch_size}")
    if e.method != "none" and e.kv_dtype.startswith("turboquant"):
        ctx.warn("TurboQuant KV sends multi-token verification through its prefill path, which may cost part of "
                 "the speculative gain" + (f"; the prediction includes the mitigations the known-bug rows add "
                 f"({', '.join(e.mitigations)})" if e.mitigations else "") + ": measure before relying on the prediction")
    if e.method != "none" and (e.prior_source.startswith("default") or "borrowed" in e.prior_source):
        ctx.warn(f"acceptance for {e.method} is not measured or published for this case ({e.prior_source}); "
                 "measure it before relying on the prediction")
    if req.quantization and METHODS[e.method].family == "head":
        ctx.warn("the target is quantized but EAGLE/Medusa drafts are trained on the 16-bit target: acceptance can "
                 "drop (vllm#36223); measure it")
    if req.quantization and req.quantization not in ONLINE_QUANT and not ctx.withheld:
        ctx.warn(f"--quantization {req.quantization}: the launch serves {ctx.model.id}, a pre-quantized checkpoint "
                 "(vLLM reads its quantization_config; no --quantization flag is rendered)")
    if req.parallel_drafting and e.method == "eagle3":
        ctx.warn("--parallel-drafting (P-EAGLE) is not modelled: the prediction is for sequential EAGLE-3 drafting "
                 "with this head; P-EAGLE heads are trained for parallel drafting (speculators type peagle) and an EAGLE-3 head may accept less: measure it")
    if e.method == "suffix":
        ctx.warn("suffix decoding needs `pip install arctic-inference==0.1.1` in the engine's environment")
    tp, pp = layout(req.gpus)
    if pp > 1:
        ctx.warn(f"{pp} nodes × {tp} GPUs: the prediction treats the {req.gpus} GPUs as one tensor-parallel group; "
                 "pipeline stages do not shorten one token's step, so TPOT may be higher. To fix: measure it (specops "
                 "bench) on the cluster")


def build_plan(ctx: Context, steps: list[DecisionStep]) -> Plan:
    req, e = ctx.request, ctx.chosen
    assert e is not None
    schedule = ctx.schedule
    gamma = e.gamma if e.method != "none" else None
    if schedule:
        gamma = max(k for _, _, k in schedule)
        if gamma == 0:
            schedule = None
    if e.method == "none":
        gamma, schedule = None, None
    method = e.method if gamma else "none"
    draft_id = e.draft.id if (e.draft and needs_draft(method)) else None  # mtp drafts with the target's own layers
    shown_draft = None if e.draft is not None and e.draft.typical else draft_id  # a made-up name is not shown
    from specops.planner.recommend import check_fits

    check_fits(ctx, e)  # a plan that runs no request is refused, naming what would fit
    _warnings(ctx, e)
    cfg = launch_config(ctx, method, draft_id, gamma, e.kv_dtype, schedule)
    if req.adaptive_verification:
        from specops.engines.adaptive import render_adaptive

        cfg = render_adaptive(cfg, ctx.table, ctx.warn)
    from specops.engines.bugs import known_bugs

    bugs = known_bugs(cfg, ctx.table)  # the same rows deploy and the gate read: refuse, mitigate, warn
    for w in bugs.warnings():
        ctx.warn(w)
    cfg = bugs.cfg
    withheld = [w for w in ctx.withheld if w.artifact == "checkpoint" or method != "none"]  # none needs no draft
    argv = [] if withheld else render_argv(cfg, entrypoint="console", table=ctx.table)
    sc = None if withheld else speculative_config(cfg, ctx.table)
    mem = e.memory
    kv_gib = mem.kv_gib(req.batch_size)
    ev = ctx.evidence if e.method != "none" else None
    predicted = Predicted(
        acceptance_rate=_r(e.acceptance_rate, 3), alpha=_r(e.alpha0, 3), mean_acceptance_length=_r(e.tau),
        speedup=_r(e.speedup), tpot_ms=_r(e.tpot_ms), baseline_tpot_ms=_r(e.baseline_tpot_ms),
        throughput_tok_s=_r(e.throughput_tok_s, 1), baseline_throughput_tok_s=_r(e.baseline_throughput_tok_s, 1),
        ttft_ms=_r(e.ttft_ms, 1), baseline_ttft_ms=_r(e.baseline_ttft_ms, 1), effective_batch=e.effective_batch,
        num_speculative_tokens_at_batch=e.gamma if method != "none" else 0,
        meets_tpot_target=None if req.tpot_ms is None else e.tpot_ms <= req.tpot_ms,
        acceptance_prior_source=e.prior_source + (f"; a typical {e.method} draft (none named: no draft-specific "
                                                  "effect)" if e.draft is not None and e.draft.typical else ""),
        break_even_acceptance_rate=_r(be, 3) if (be := break_even_rate(e)) is not None and method != "none" else None,
        **_ranged(ev), evidence=(ev.line() if ev else _no_range(ctx, e)), evidence_near=ev.near if ev else None,
        evidence_rows=list(ev.evidence_rows) if ev else None,
        gamma_curve=_gamma_curve(ctx, e), acceptance=_acceptance(ctx, e),
    )
    memory = Memory(weights_gib=_r(mem.weights_gib), draft_gib=_r(mem.draft_gib), kv_cache_gib=_r(kv_gib),
                    total_gib=_r(mem.weights_gib + mem.draft_gib + kv_gib), available_gib=_r(mem.available_gib),
                    fits=e.fits, max_batch_that_fits=mem.max_batch())
    return Plan(
        model=ctx.model.id, gpu=ctx.gpu.name, gpus=req.gpus, method=method, draft=shown_draft,
        num_speculative_tokens=gamma, num_speculative_tokens_per_batch_size=schedule, kv_cache_dtype=e.kv_dtype,
        tensor_parallel_size=cfg.tensor_parallel_size, predicted=predicted, memory=memory, decision_path=steps,
        warnings=[w for w in ctx.warnings if ctx.warning_about.get(w, method) == method],  # only the pick's
        alternatives=_alternatives(ctx, e),
        vllm=VllmLaunch(version=req.vllm_version, argv=argv, speculative_config=sc, nodes=cfg.pipeline_parallel_size,
                        setup=_multi_node_setup(cfg.pipeline_parallel_size), withheld=withheld),
    )


def _multi_node_setup(nodes: int) -> str | None:
    """How a replica over ``nodes`` machines is started (vLLM's examples/online_serving/multi-node-serving.sh)."""
    if nodes == 1:
        return None
    return (f"start a Ray cluster of {nodes} nodes first (vLLM's examples/online_serving/multi-node-serving.sh: "
            "`multi-node-serving.sh leader --ray_cluster_size=" f"{nodes}` on the head node, `multi-node-serving.sh "
            "worker --ray_address=HEAD_NODE_IP` on each other node), then run the launch on the head node only")


def slug(text: str) -> str:
    """A DNS-1123 label from a model id: 'meta-llama/Llama-3.1-8B-Instruct' -> 'llama-3-1-8b-instruct'."""
    base = text.rstrip("/").split("/")[-1].lower()
    s = re.sub(r"[^a-z0-9]+", "-", base).strip("-")[:63].strip("-")
    return s or "deployment"


def to_deployment(plan: Plan, name: str | None = None) -> DeploymentSpec:
    """The DeploymentSpec (YAML users keep in git) for a plan."""
    from specops.engines.spec import (
        DNS1123_LABEL,
        DeploymentSpec,
        EngineBlock,
        Expectations,
        KubernetesBlock,
        ModelRef,
        SpeculativeBlock,
    )
    from specops.errors import InputError

    if plan.vllm.withheld:
        raise InputError("no DeploymentSpec: " + "; ".join(w.missing for w in plan.vllm.withheld),
                         "; and ".join(w.fix for w in plan.vllm.withheld))
    if plan.vllm.nodes > 1:
        raise InputError(f"this plan is one replica over {plan.vllm.nodes} nodes, and `specops deploy` starts vLLM on "
                         "one machine", f"{plan.vllm.setup} (the table output shows the launch), or use --gpus 8 or fewer")
    if name is not None and not DNS1123_LABEL.match(name):
        raise InputError(f'--name "{name}" is not a DNS-1123 label',
                         'use lowercase letters, digits and "-", starting and ending with a letter or digit (≤ 63)')
    sched = plan.num_speculative_tokens_per_batch_size
    return DeploymentSpec(
        name=name or slug(plan.model),
        target=ModelRef(model=plan.model, revision=_cached_pin(plan.model)),
        draft=ModelRef(model=plan.draft, revision=_cached_pin(plan.draft)) if plan.draft else None,
        speculative=SpeculativeBlock(method=plan.method, num_speculative_tokens=plan.num_speculative_tokens,
                                     num_speculative_tokens_per_batch_size=sched,
                                     draft_kv_cache_dtype=(plan.vllm.speculative_config or {}).get("kv_cache_dtype"),
                                     parallel_drafting=(plan.vllm.speculative_config or {}).get("parallel_drafting"),
                                     adaptive_verification=bool((plan.vllm.speculative_config or {}).get(
                                         "enable_adaptive_verification"))),
        engine=EngineBlock(vllm_version=plan.vllm.version, kv_cache_dtype=plan.kv_cache_dtype,
                           tensor_parallel_size=plan.tensor_parallel_size, max_model_len=_max_model_len(plan),
                           quantization=_flag(plan.vllm.argv, "--quantization"),
                           enforce_eager="--enforce-eager" in plan.vllm.argv,
                           extra_args=[a for a in plan.vllm.argv if a == "--no-enable-prefix-caching"]
                           + _parallel_flags(plan.vllm.argv)),
        kubernetes=KubernetesBlock(gpus_per_replica=plan.gpus if plan.gpus != plan.tensor_parallel_size else None),
        expectations=_expectations(plan, Expectations),
    )


def _parallel_flags(argv: list[str]) -> list[str]:
    """The expert/data-parallel flags of a rendered argv (EXPERT_PARALLEL_FLAGS, with their values)."""
    out: list[str] = []
    for i, a in enumerate(argv):
        if a == "--data-parallel-size":
            out += argv[i:i + 2]
        elif a == "--enable-expert-parallel":
            out.append(a)
    return out


def _expectations(plan: Plan, cls):
    p = plan.predicted
    if plan.method == "none" or p.break_even_acceptance_rate is None:
        return None
    return cls(acceptance_rate=p.acceptance_rate, break_even_acceptance_rate=min(1.0, p.break_even_acceptance_rate),
               speedup=p.speedup, batch=p.effective_batch, gpu=f"{plan.gpus}x {plan.gpu}",
               source=f"specops recommend (predicted; acceptance prior: {p.acceptance_prior_source})")


def _cached_pin(model: str) -> str | None:
    """A hub model's revision: the commit the user's Hugging Face cache holds (None: not cached, or a folder)."""
    from pathlib import Path

    from specops.engines.bugs import cached_revision

    if model.startswith(("/", "./", "../", "~")) or Path(model).expanduser().exists() or "/" not in model:
        return None
    return cached_revision(model)


def _flag(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def _max_model_len(plan: Plan) -> int | None:
    value = _flag(plan.vllm.argv, "--max-model-len")
    return int(value) if value else None
