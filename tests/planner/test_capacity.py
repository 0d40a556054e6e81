"""The capacity search (issue 44, specops/planner/capacity.py) through `specops recommend --gpus-available`.

Nothing is faked: the shipped catalogs, priors and step-cost model. Each claim of the table is checked by an
independent route: a replica's capacity against `recommend --qps` (planner/load.py ``at_rate``) just below and
above it, replicas and headroom by arithmetic, the choice against every other fitting row, and the refusal's
"To fix" by running what it says.
"""

import json
import math
import re

import pytest

from specops.errors import InputError

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
WORKLOAD = dict(model=LLAMA, gpu="H100", context_len=4096, output_len=512)
SLO = dict(tpot_slo_ms=40.0, ttft_slo_ms=2000.0)


@pytest.fixture(scope="module")
def answer():
    from specops.api.capacity import capacity

    return capacity(dict(WORKLOAD), gpus_available=6, qps=12.0, **SLO)


def _meets(plan, tpot, ttft) -> bool:
    ld = plan.load
    return bool(ld and ld.converged and ld.tpot_ms is not None and ld.tpot_ms <= tpot and ld.ttft_ms <= ttft)


def test_the_chosen_layout_serves_the_rate_with_the_fewest_gpus_of_the_pool(answer):
    fitting = [r for r in answer.rows if r.fits_pool]
    assert answer.chosen in fitting
    assert answer.chosen.gpus_total == min(r.gpus_total for r in fitting)
    ties = [r for r in fitting if r.gpus_total == answer.chosen.gpus_total]
    assert answer.chosen.headroom == max(r.headroom for r in ties)
    for r in answer.rows:  # every row's arithmetic, by hand
        if r.capacity_rps > 0:
            assert r.replicas == math.ceil(12.0 / r.capacity_rps - 1e-9)
            assert r.gpus_total == r.replicas * r.gpus_per_replica
            assert r.headroom == pytest.approx(r.replicas * r.capacity_rps / 12.0 - 1, abs=2e-3)
            assert r.fits_pool == (r.gpus_total <= 6)
    assert {r.gpus_per_replica for r in answer.rows} >= {1, 2, 4}  # every TP size of a node that divides 32 heads
    assert answer.per_replica_qps == pytest.approx(12.0 / answer.chosen.replicas, abs=1e-3)
    assert _meets(answer.plan, 40.0, 2000.0)  # `recommend --qps Q/replicas` on the chosen layout meets the SLO


def test_a_replicas_capacity_is_where_recommend_qps_stops_meeting_the_slo(answer):
    from specops.api.recommend import build_request, recommend_with_defaults

    for row in (r for r in answer.rows if r.gpus_per_replica == 2):
        req = build_request(**WORKLOAD, gpus=2, tpot_ms=40.0, method=row.method, draft=row.draft)
        below = recommend_with_defaults(req.model_copy(update={"qps": row.capacity_rps * 0.97}))
        above = recommend_with_defaults(req.model_copy(update={"qps": row.capacity_rps * 1.05}))
        assert _meets(below, 40.0, 2000.0), (row, below.load)
        assert not _meets(above, 40.0, 2000.0), (row, above.load)


def test_speculation_and_its_crossover_are_reported_with_evidence(answer):
    spec = [r for r in answer.rows if r.method != "none"]
    assert spec, "the recommender picks a speculative method for an 8B chat target on an H100"
    if answer.chosen.method != "none":
        assert answer.capacity_low_rps <= answer.chosen.capacity_rps <= answer.capacity_high_rps
        assert "held-out errors on published rows" in answer.evidence
        assert answer.crossover_note
    none = {r.gpus_per_replica: r.capacity_rps for r in answer.rows if r.method == "none"}
    with_spec = {r.gpus_per_replica: r.capacity_rps for r in spec}
    assert any(with_spec[g] != none[g] for g in with_spec)  # speculation is in the loop, not copied


@pytest.mark.parametrize(("values", "kw", "match"), [
    ({}, {"tpot_slo_ms": None}, "--tpot-slo"),
    ({}, {"tpot_slo_ms": -1.0}, "--tpot-slo"),
    ({"gpus": 4}, {"tpot_slo_ms": 40.0}, "--gpus"),
    ({"batch_size": 8}, {"tpot_slo_ms": 40.0}, "--batch-size"),
])
def test_bad_capacity_input_is_one_clear_line(values, kw, match):
    from specops.api.capacity import capacity

    with pytest.raises(InputError, match=match) as info:
        capacity({**WORKLOAD, **values}, gpus_available=4, qps=1.0, **kw)
    assert "To fix:" in info.value.one_line()


def test_cli_refuses_a_pool_too_small_with_exit_2_and_both_fixes_work(cli):
    args = ["recommend", "--model", LLAMA, "--gpu", "H100", "--output-len", "512", "--tpot-slo", "40",
            "--ttft-slo", "2000"]
    r = cli(*args, "--qps", "12", "--gpus-available", "2")
    assert r.returncode == 2 and "needs more than 2 GPUs" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    fix = r.stderr.split("To fix:", 1)[1]
    need = re.search(r"--gpus-available (\d+)", fix).group(1)
    qps = re.search(r"--qps ([0-9.]+)", fix).group(1)
    r = cli(*args, "--qps", "12", "--gpus-available", need, "-o", "json")  # fix 1: the GPUs it names
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["schema_version"] == 1 and data["chosen"]["gpus_total"] <= int(need) and data["rows"]
    r = cli(*args, "--qps", qps, "--gpus-available", "2")  # fix 2: the rate the pool serves
    assert r.returncode == 0, r.stderr
    assert "chosen:" in r.stdout and "layouts tried" in r.stdout


def test_slo_flags_without_a_pool_are_refused(cli):
    r = cli("recommend", "--model", LLAMA, "--gpu", "H100", "--tpot-slo", "40")
    assert r.returncode == 2 and "--gpus-available" in r.stderr and "Traceback" not in r.stderr


def test_keda_without_a_deployment_output_is_refused_before_the_search(cli):
    r = cli("recommend", "--model", LLAMA, "--gpu", "H100", "--gpus-available", "2", "--qps", "1", "--tpot-slo", "40",
            "--keda")
    assert r.returncode == 2 and "To fix: add -o deployment" in r.stderr and "Traceback" not in r.stderr
