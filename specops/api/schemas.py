"""JSON Schemas published under docs/schemas/: the DeploymentSpec (input of `specops deploy`) and the
``-o json`` documents of the commands whose output is one pydantic model.

Generated from the models by scripts/gen_docs.py; tests/cli/test_schemas.py checks the files against
the models and real CLI output against the files. Every output schema requires ``schema_version``
(:data:`SCHEMA_VERSION`), which the CLI adds to each document it prints (specops.cli.output.versioned).
Model imports stay inside the functions (the CLI imports SCHEMA_VERSION from here on every -o json).
"""

from __future__ import annotations

from typing import Any

SCHEMA_VERSION = 1
"""Version of every ``-o json`` / ``-o yaml`` document (docs/schemas/): each object printed carries it as
``schema_version`` (a list: each of its objects). Raised when a field is renamed, removed or changes
meaning; new fields do not raise it."""

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _output_models() -> dict[str, tuple[str, Any, dict[str, dict]]]:
    """name -> (the command, its model, properties the CLI adds to the model's dump)."""
    from pydantic import Field

    from specops.benchmark.types import BenchResult
    from specops.checks.types import ValidationReport
    from specops.drift.monitor import CycleReport
    from specops.engines.deploy import DeployResult
    from specops.models import Strict
    from specops.planner.capacity import CapacityPlan
    from specops.planner.types import Plan
    from specops.registry.lineage import LineageReport
    from specops.registry.transfer import PruneReport
    from specops.tune.types import TuneReport

    class SettingRow(Strict):
        name: str
        value: str | int | float | bool | None = Field(description="As resolved without a flag; secrets `<redacted>`.")
        source: str = Field(description="SPECOPS_<NAME>, config.yaml, default or unset.")
        flag: str | None = Field(description="The command-line flag that overrides it, if any.")
        env: str
        default: str | None
        meaning: str

    class ConfigShow(Strict):
        """`specops config show -o json` (specops.settings.explain_settings)."""
        home: str
        home_source: str
        config_file: str
        config_file_exists: bool
        settings: list[SettingRow]

    verdict = {"ok": {"type": "boolean"}, "verdict": {"type": "string"}}
    return {
        "recommend": ("specops recommend -o json", Plan, {}),
        "recommend-capacity": ("specops recommend --gpus-available N --qps Q --tpot-slo MS -o json", CapacityPlan, {}),
        "deploy-local": ("specops deploy SPEC -o json (platform local)", DeployResult, {}),
        "lineage-check": ("specops lineage check -o json", LineageReport, verdict),
        "lineage-prune": ("specops lineage prune -o json", PruneReport, {}),
        "validate": ("specops validate -o json (one deployment)", ValidationReport, {"exit_code": {"type": "integer"}}),
        "bench": ("specops bench -o json", BenchResult, {}),
        "monitor-cycle": ("specops monitor --once -o json (one JSON line per cycle)", CycleReport, {}),
        "tune": ("specops tune -o json", TuneReport, {}),
        "config-show": ("specops config show -o json", ConfigShow, {}),
    }


def _output_schema(command: str, model: Any, added: dict[str, dict]) -> dict:
    schema = model.model_json_schema(mode="serialization")
    props = {"schema_version": {"const": SCHEMA_VERSION, "description": "Version of this document's schema "
                                "(specops.api.schemas.SCHEMA_VERSION)."}, **added, **schema.get("properties", {})}
    schema["properties"] = props
    schema["required"] = ["schema_version", *added, *schema.get("required", [])]
    schema["description"] = f"`{command}`. " + (schema.get("description") or "").strip()
    return {"$schema": DRAFT, **schema}


def published_schemas() -> dict[str, dict]:
    """File stem -> JSON Schema, for docs/schemas/<stem>.schema.json."""
    from specops.engines.spec import DeploymentSpec

    spec = DeploymentSpec.model_json_schema(mode="validation")
    out = {"deployment-spec": {"$schema": DRAFT, **spec,
                               "description": "A DeploymentSpec: the input of `specops deploy` and the output of "
                               "`specops recommend -o deployment`. " + (spec.get("description") or "").strip()}}
    for name, (command, model, added) in _output_models().items():
        out[name] = _output_schema(command, model, added)
    return out
