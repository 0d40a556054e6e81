"""Checklists and profiles load strictly; every malformed file gives one line with file, line, To fix."""

from __future__ import annotations

import pytest

from specops.checks.playbook import STAGES, get_profile, load_checklist, load_profiles
from specops.errors import ConfigFileError, NotFoundError

GOOD = """name: deploy
description: d
checks:
  - id: deploy.acceptance-p50
    description: x
    source: seed 001
    kind: metric
    measure: per_token_alpha
    statistic: p50
    threshold: {op: ">=", profile: acceptance_p50_min}
    fix: retrain
"""


@pytest.mark.parametrize("stage", STAGES)
def test_shipped_checklists_load(stage):
    cl = load_checklist(stage)
    assert cl.name == stage and all(c.id.startswith(stage + ".") and c.source and c.fix for c in cl.checks)


def test_shipped_profiles_hold_the_seed_floors_and_lower_cpu_tiny_ones():
    gpu, tiny = get_profile("gpu-default"), get_profile("cpu-tiny")
    assert (gpu.acceptance_p50_min, gpu.acceptance_p5_min) == (0.70, 0.50)
    assert tiny.acceptance_p50_min < gpu.acceptance_p50_min and tiny.acceptance_p5_min < gpu.acceptance_p5_min
    assert set(load_profiles().profiles) == {"gpu-default", "cpu-tiny"}


@pytest.mark.parametrize("change, line, words", [
    (("kind: metric", "kind: metrik"), 7, "kind"),
    (("op: \">=\"", "op: \"=>\""), 10, "op"),
    (("profile: acceptance_p50_min", "profile: acceptance_p50"), 10, 'Did you mean "acceptance_p50_min"'),
    (("profile: acceptance_p50_min", "value: high"), 10, "value"),
    (("    fix: retrain\n", "    fix: retrain\n    treshold: 3\n"), 12, 'unknown key "checks.0.treshold"'),
    (("measure: per_token_alpha", "measure: per_token_alfa"), 8, 'Did you mean "per_token_alpha"'),
    (("description: x", "description: [x"), None, "invalid YAML"),
])
def test_malformed_checklists_name_file_line_and_fix(tmp_path, change, line, words):
    path = tmp_path / "bad.yaml"
    path.write_text(GOOD.replace(*change))
    with pytest.raises(ConfigFileError) as exc:
        load_checklist(str(path))
    text = exc.value.one_line()
    assert str(path) in text and words in text and "To fix:" in text and "\n" not in text
    if line:
        assert f"{path}:{line}:" in text


def test_a_threshold_on_a_yes_no_measure_is_refused(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(GOOD.replace("measure: per_token_alpha", "measure: spec_counters_present"))
    with pytest.raises(ConfigFileError, match="takes no threshold"):
        load_checklist(str(path))


def test_profile_p5_floor_above_p50_is_refused(tmp_path):
    text = (load_profiles.__globals__["playbook_path"]("profiles.yaml")).read_text()
    path = tmp_path / "profiles.yaml"
    path.write_text(text.replace("acceptance_p5_min: 0.50", "acceptance_p5_min: 0.90"))
    with pytest.raises(ConfigFileError, match="acceptance_p5_min is above"):
        load_profiles(path)


def test_unknown_checklist_and_profile_suggest_a_name():
    with pytest.raises(NotFoundError, match='Did you mean "deploy"'):
        load_checklist("deplyo")
    with pytest.raises(NotFoundError, match='Did you mean "cpu-tiny"'):
        get_profile("cpu-tinny")
