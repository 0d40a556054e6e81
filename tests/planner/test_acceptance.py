"""The acceptance model (specops.planner.acceptance) and its data (playbooks/data/acceptance_2026-12.csv).

Every direction test fits the model *without* the source that publishes that direction (the fit is the
real one, on the shipped rows minus a source), so a pass shows the direction generalises from other
sources rather than being recalled. No fakes: the only made-up rows are in the pooling test, which adds
rows of a cell the data does not have and checks how far the estimate moves.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from specops.planner import acceptance as acc
from specops.planner.priors import calibrate, load_published
from specops.planner.recommend import recommend
from specops.planner.types import RecommendRequest

REPO = Path(__file__).resolve().parents[2]
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
TASK_CLASSES = {"chat", "code", "code-edit", "math", "summarization", "translation", "rag", "qa", "mixed", "multimodal"}
METHOD_CLASSES = {"eagle3", "eagle", "mtp", "draft_model", "ngram", "suffix", "dflash", "medusa", "other"}


@lru_cache(maxsize=1)
def rows() -> tuple[acc.AcceptanceRow, ...]:
    return tuple(acc.load_rows())


@lru_cache(maxsize=8)
def without(source_id: str) -> acc.AcceptanceModel:
    return acc.fit([r for r in rows() if r.source_id != source_id])


def alpha(model, method: str, task: str, **kw) -> float:
    est = acc.estimate(model, method, task=task, target=LLAMA, **kw)
    assert est is not None
    return est.alpha0


# --- the data -------------------------------------------------------------------------------------

def test_every_row_has_provenance_and_numbers_in_range():
    data = rows()
    assert len(data) >= 150 and len({r.source_id for r in data}) >= 20
    assert len({r.id for r in data}) == len(data)
    for r in data:
        assert r.source and r.location and r.url.startswith("https://"), r.id
        assert r.method in METHOD_CLASSES and r.task_class in TASK_CLASSES and r.structure in ("chain", "tree"), r.id
        measured = [x for x in (r.tau, r.accepted_rate, r.alpha, r.tau_lower_bound, r.speedup) if x is not None]
        assert measured, f"{r.id} publishes nothing"
        assert all(math.isfinite(x) for x in measured), r.id
        if r.tau is not None:
            assert 1.0 <= r.tau <= (r.gamma + 1 if r.gamma and r.structure == "chain" else 9.0), r.id
        for rate in (r.accepted_rate, r.alpha):
            assert rate is None or 0.0 < rate <= 1.0, r.id
        if r.per_position and r.per_position_kind == "cumulative":
            assert all(a >= b for a, b in zip(r.per_position, r.per_position[1:], strict=False)), r.id
        if r.temperature is not None:
            assert 0.0 <= r.temperature <= 2.0, r.id


def test_rows_taken_from_playbooks_data_keep_their_source_location_and_value():
    """Rows copied from the older tables cite them (from_file) and carry the same citation and number."""
    copied = [r for r in rows() if r.from_file.endswith(tuple(f" row {i}" for i in range(2, 200)))
              and not r.from_file.startswith("heldout_2026-12")]
    assert len(copied) >= 70
    cache: dict[str, list[dict]] = {}
    for r in copied:
        name, _, line = r.from_file.rpartition(" row ")
        table = cache.setdefault(name, list(csv.DictReader(open(REPO / "playbooks" / "data" / name, encoding="utf-8"))))
        raw = table[int(line) - 2]
        assert (raw["source"], raw["location"]) == (r.source, r.location), r.id
        if r.tau is not None:
            assert float(raw["tau"]) == pytest.approx(r.tau), r.id


# --- directions, each with its own source held out -----------------------------------------------------

def test_eagle3_code_and_math_above_chat_without_the_eagle3_paper():
    m = without("eagle3-paper")
    chat = alpha(m, "eagle3", "chat", variant="3")
    assert alpha(m, "eagle3", "code", variant="3") > chat + 0.03
    assert alpha(m, "eagle3", "math", variant="3") > chat + 0.03


def test_prompt_lookup_summarization_and_rag_above_chat_with_either_source_held_out():
    """EAGLE-3 Table 1 (PLD on CNN/DM vs MT-bench) and Spec-Bench (PLD per task) each carry the direction alone."""
    for held in ("eagle3-paper", "spec-bench"):
        m = without(held)
        chat = alpha(m, "ngram", "chat")
        assert alpha(m, "ngram", "summarization") > chat + 0.05, held
    m = without("eagle3-paper")
    assert alpha(m, "ngram", "rag") > alpha(m, "ngram", "chat") + 0.01  # Spec-Bench: +9% speedup over chat, ≈ +0.04 in α0


@pytest.mark.parametrize(("held", "method", "task"), [
    ("spec-bench", "eagle3", "qa"), ("spec-bench", "eagle3", "summarization"), ("spec-bench", "eagle", "summarization"),
    ("speculators-pr-610", "eagle3", "translation"), ("speculators-pr-610", "eagle3", "qa"), ("eagle2-paper", "eagle", "qa"),
])
def test_a_task_that_lowers_a_model_draft_lowers_it_with_the_publishing_source_held_out(held, method, task):
    """Spec-Bench, speculators PR #610 and the EAGLE-2 paper each publish qa/summarization/translation below chat
    for EAGLE/EAGLE-3; the one or few rows another source has of the cell carry the direction (chat is the
    reference the thin cell shrinks toward, so the direction is not the pooled average's)."""
    est = acc.estimate(without(held), method, task=task, target=LLAMA)
    assert est.cell_rows and not any(r.source_id == held for r in rows() if r.id in est.cell_rows)
    assert est.task_shift < -0.005
    assert f"--task {task} lowers {method}'s acceptance" in est.task_note(method, task)


def test_suffix_follows_prompt_lookup_where_it_has_no_rows_of_its_own():
    m = without("eagle3-paper")
    chat = acc.estimate_prior(m, "suffix", task="chat", target=LLAMA)
    summ = acc.estimate_prior(m, "suffix", task="summarization", target=LLAMA)
    assert "borrowed from ngram" in summ.source and "borrowed" not in chat.source
    assert summ.alpha0 > chat.alpha0


def test_a_task_without_rows_of_the_method_does_not_move_it_and_says_which_rows_it_used():
    m = acc.fit([r for r in rows() if r.source_id not in ("vllm-pr-24344", "suffixdecoding-paper")])  # the code-edit rows
    est = acc.estimate(m, "ngram", task="agentic", target=LLAMA)
    base = acc.estimate(m, "ngram", task="code", target=LLAMA)  # no ngram code-generation row either
    assert est.cell_rows == () and est.alpha0 == pytest.approx(base.alpha0)
    note = est.task_note("ngram", "agentic")
    assert "does not move" in note and f"{est.method_rows} ngram rows" in note


def test_partial_pooling_a_thin_cell_shrinks_toward_its_parent():
    """Rows of a cell the data lacks (eagle3 × translation at α0 ≈ 0.99) move the estimate a little with
    one row and more with five; neither reaches the rows' own value."""
    base = [r for r in rows() if not (r.method == "eagle3" and r.task_class == "translation")]
    proto = next(r for r in base if r.id == "A022")  # an eagle3 chain row (vLLM issue #26191, K=7)
    made = [acc.AcceptanceRow(**{**proto.__dict__, "id": f"X{i}", "source_id": f"made-{i}", "task_class": "translation",
                                 "tau": 7.8, "accepted_rate": None}) for i in range(5)]
    parent = alpha(acc.fit(base), "eagle3", "translation", variant="3")
    one = alpha(acc.fit([*base, made[0]]), "eagle3", "translation", variant="3")
    five = alpha(acc.fit([*base, *made]), "eagle3", "translation", variant="3")
    assert parent < one < five < 0.97


def test_leave_one_source_out_meets_the_goal():
    scored = acc.cross_validate(list(rows()))
    errs = sorted(abs(s.log_error) for s in scored if s.log_error is not None)
    assert len(errs) >= 150
    assert errs[len(errs) // 2] <= 0.15


def test_draft_models_at_scale_acceptance_is_not_what_underpredicts_them():
    """The AMD MI300X 70B/405B rows (../shared/data/heldout_2026-12.csv) publish speedups only; with their
    source held out, the predicted τ at their γ=5 is at least the published speedup (τ bounds any speedup),
    so their underprediction is the cost side. One row is flagged ``quality`` (Table 4, ISL 32768: latencies too
    small for a 32K prefill of a 70B model, units unclear); since Leviathan et al.'s LaMDA 137B rows (Table 3) joined
    the fit, the target-size slope is ≈ 0 and that row's published 2.98x sits about 3% above the predicted τ: it is held
    to within 5%, the six clean rows to the bound itself."""
    m = without("amd-rocm-dd")
    checked = acc.lower_bounds(m, [r for r in rows() if r.source_id == "amd-rocm-dd"])
    assert len(checked) == 7
    assert all(tau >= r.tau_lower_bound for r, tau in checked if "quality" not in r.flags)
    assert all(tau >= 0.95 * r.tau_lower_bound for r, tau in checked)


# --- through recommend --------------------------------------------------------------------------------

def _plan(task: str, model: acc.AcceptanceModel, held: str, **kw):
    strings = {r.source for r in rows() if r.source_id == held}
    priors = calibrate([p for p in load_published() if p.source not in strings]).with_acceptance(model)
    req = RecommendRequest(model=LLAMA, gpu="H100", task=task, **kw)
    return recommend(req, priors=priors)


def test_task_moves_acceptance_and_gamma_through_the_cost_model():
    m = without("eagle3-paper")
    code, chat = _plan("code", m, "eagle3-paper", method="eagle3"), _plan("chat", m, "eagle3-paper", method="eagle3")
    assert code.predicted.alpha > chat.predicted.alpha
    assert code.num_speculative_tokens >= chat.num_speculative_tokens
    assert code.predicted.speedup > chat.predicted.speedup
    curve = code.predicted.gamma_curve
    assert [p.gamma for p in curve] == sorted(p.gamma for p in curve) and len(curve) >= 3
    assert all(b.mean_acceptance_length >= a.mean_acceptance_length for a, b in zip(curve, curve[1:], strict=False))
    best = max(curve, key=lambda p: p.speedup)
    assert abs(best.gamma - code.num_speculative_tokens) <= 2  # the pick sits at the curve's top (ties: smaller γ)
    ev = code.predicted.acceptance
    assert ev.task_class == "code" and ev.cell_rows and ev.mean_acceptance_length_low < code.predicted.mean_acceptance_length
    task_step = next(s for s in code.decision_path if s.rule == "task")
    assert "raises eagle3's acceptance" in task_step.outcome and ev.cell_rows[0] in task_step.outcome


def test_cli_json_carries_the_gamma_curve_and_the_acceptance_cell():
    out = subprocess.run([sys.executable, "-m", "specops", "recommend", "--model", LLAMA, "--gpu", "H100", "--task", "chat",
                          "-o", "json"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    pred = plan["predicted"]
    assert pred["gamma_curve"] and pred["acceptance"]["cell_rows"]
    assert pred["acceptance_prior_source"].startswith("acceptance model (playbooks/data/acceptance_2026-12.csv)")


def test_the_fit_is_at_the_penalised_fixed_point_every_effect_solves_its_own_normal_equation():
    """The backfit (all keys of a group updated at once) has converged to the ridge solution: for each effect,
    value = Σ w·(y − the rest of the prediction) / (Σ w + penalty) over its rows. Checked on the shipped fit from the
    fitted effects alone, not by re-running the fit."""
    data = rows()
    decay = acc.decay_table(data)
    obs = acc.observations(data, lambda r: (decay.get((r.method, r.task_class)) or decay.get((r.method, "*"))
                                            or acc.DecayEstimate(acc.DECAY.get(r.method, 1.0), (), "")).value)
    model = acc._fit(obs, decay)
    keys = [acc._keys(o.row) for o in obs]
    slopes = [acc._slopes(o.row) for o in obs]
    pred = [model.logit(k, s) for k, s in zip(keys, slopes, strict=True)]
    wsum = sum(o.weight for o in obs)  # μ: the weighted mean residual is 0 (to the fit's 60 sweeps)
    assert abs(sum(o.weight * (o.y - p) for o, p in zip(obs, pred, strict=True))) / wsum < 1e-2
    worst = 0.0
    for g, lam in acc.PENALTY.items():
        for k, value in model.effects[g].items():
            idx = [i for i, ks in enumerate(keys) if ks[g] == k]
            w = sum(obs[i].weight for i in idx)
            solved = sum(obs[i].weight * (obs[i].y - pred[i] + value) for i in idx) / (w + lam)
            worst = max(worst, abs(solved - value))
    assert len(model.effects["source"]) >= 35 and worst < 1e-2, worst  # 60 sweeps: converged to ~1e-3 in logit
