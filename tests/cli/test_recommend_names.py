"""GPU names as people type them and machines print them (issue 41): every catalog card answers to the
name nvidia-smi / rocm-smi prints, `recommend --help` lists every card, --tp is --gpus."""

import json

import pytest

from specops.planner.catalog import load_catalogs
from specops.planner.names import check_gpu_name, gpu_names_for_help

HOSTS = {"cpu", "TPU-v4"}  # no smi tool prints these


def test_every_card_has_its_smi_name_and_resolves_by_it_before_and_in_the_planner():
    cat = load_catalogs()
    for g in cat.gpus:
        if g.name in HOSTS:
            continue
        assert g.smi_names, f"{g.name} has no nvidia-smi / rocm-smi name"
        for smi in g.smi_names:
            check_gpu_name(smi)  # the early check (names.py) accepts it
            assert cat.gpu(smi).name == g.name, smi


def test_the_added_cards_carry_datasheet_figures_and_a_source():
    cat = load_catalogs()
    added = {"H100-NVL": 94, "GH200": 96, "A100-PCIE-40GB": 40, "A100-PCIE-80GB": 80, "L40": 48, "RTX-A6000": 48,
             "RTX-6000-Ada": 48}
    for name, gib in added.items():
        g = cat.gpu(name)
        assert g.memory_gib == gib and g.bandwidth_gbs > 0 and g.bf16_tflops > 0
        assert "datasheet" in g.source.lower() or "product brief" in g.source.lower(), name


def test_help_lists_every_catalog_gpu():
    names = [g.name for g in load_catalogs().gpus]
    assert gpu_names_for_help().split(", ") == names


@pytest.mark.parametrize("typed, card", [("NVIDIA A100 80GB PCIe", "A100-PCIE-80GB"), ("NVIDIA H100 NVL", "H100-NVL"),
                                         ("NVIDIA GH200 480GB", "GH200"), ("L40", "L40"), ("RTX A6000", "RTX-A6000")])
def test_names_from_the_issue_resolve(typed, card):
    check_gpu_name(typed)  # what the CLI checks before the planner loads
    assert load_catalogs().gpu(typed).name == card


def test_an_smi_name_and_the_tensor_parallel_alias_through_the_cli(cli):
    r = cli("recommend", "--model", "llama-3.1-8b-instruct", "--gpu", "NVIDIA A100 80GB PCIe",
            "--tensor-parallel-size", "2", "-o", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["gpu"] == "A100-PCIE-80GB" and data["tensor_parallel_size"] == 2
    assert data["vllm"]["argv"][data["vllm"]["argv"].index("--tensor-parallel-size") + 1] == "2"


def test_help_lists_the_catalog_and_the_aliases(cli):
    flat = " ".join(cli("recommend", "--help").stdout.split())
    for name in ("H100-NVL", "GH200", "RTX-6000-Ada", "MI355X", "A100-PCIE-80GB"):
        assert name in flat
    assert "--tensor-parallel-size" in flat and "--tp" in flat
