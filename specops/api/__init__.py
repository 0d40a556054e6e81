"""The orchestration layer: what every CLI command calls, one module per CLI group.

``specops X`` -> ``specops/cli/X.py`` (parse, call one function here, render) -> ``specops/api/X.py``
(join the capability packages) -> capability packages -> models, errors, settings. This package's
names resolve lazily, so ``import specops.api`` stays cheap. Functions return data (pydantic models / dicts) and raise
:class:`specops.errors.SpecopsError` subclasses; they never print.

Each group module is imported as itself (``from specops.api import recommend``); the names below
are shortcuts to the most used functions, none named like a group module::

    from specops import api

    plan = api.recommend_plan(api.build_request(model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100"))
    result = api.deploy_spec("deploy.yaml", dry_run=True)
    rows = api.status()
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> "module:attribute"; each module is one CLI group (`specops X` -> specops/cli/X.py -> here).
_EXPORTS = {
    # recommend
    "build_request": "specops.api.recommend:build_request",
    "recommend_plan": "specops.api.recommend:recommend_with_defaults",
    "deployment_yaml": "specops.api.recommend:deployment_yaml",
    # deploy
    "load_spec": "specops.engines.spec:load_spec",
    "deploy_spec": "specops.api.deploy:deploy",
    "deploy_local": "specops.engines.deploy:deploy_local",
    "deploy_kubernetes": "specops.k8s:deploy_kubernetes",
    "render_manifests": "specops.k8s:render_manifests",
    "status": "specops.api.deploy:status",
    "stop": "specops.api.deploy:stop",
    "restart": "specops.api.deploy:restart",
    "promote": "specops.api.kube:promote",
    "rollback": "specops.api.kube:rollback",
    # lineage and deployments
    "open_registry": "specops.registry:open_registry",
    "check_lineage": "specops.api.lineage:check",
    "adopt": "specops.api.deployment:adopt",
    # measure
    "read_metrics": "specops.api.measure:measure",
    "bench": "specops.api.measure:bench_deployment",
    "doctor": "specops.api.measure:doctor",
    # validate
    "validate_deployment": "specops.api.validate:validate",
    "gate": "specops.api.validate:gate",
    # tune
    "run_tune": "specops.api.tune:tune",
    # watch and heal
    "run_monitor": "specops.api.monitor:monitor",
    "run_runbook": "specops.api.monitor:run_runbook",
    "retrain_draft": "specops.api.retrain:retrain",
    "heal_deployment": "specops.api.heal:heal",
}

GROUPS = ("recommend", "deploy", "lineage", "deployment", "measure", "validate", "tune", "monitor", "retrain", "heal",
          "kube", "config")
"""One module per CLI group, in the order of `specops --help`."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    try:
        target = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"specops.api has no attribute {name!r}") from None
    module, attr = target.split(":")
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
