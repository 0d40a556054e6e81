"""The library facade: one import for everything the CLI can do.

Each name resolves lazily to the capability package that implements it, so ``import specops.api``
stays cheap. Functions return data (pydantic models / dicts) and raise
:class:`specops.errors.SpecopsError` subclasses; they never print.

Example::

    from specops import api

    plan = api.recommend(api.build_request(model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100"))
    spec = api.load_spec("deploy.yaml")
    result = api.deploy_local(spec)
    reg = api.open_registry()
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> "module:attribute"
_EXPORTS = {
    # recommend
    "build_request": "specops.planner.api:build_request",
    "recommend": "specops.planner.api:recommend_with_defaults",
    # deploy
    "load_spec": "specops.engines.spec:load_spec",
    "deploy_local": "specops.engines.deploy:deploy_local",
    "deploy_kubernetes": "specops.k8s:deploy_kubernetes",
    "render_manifests": "specops.k8s:render_manifests",
    "status": "specops.engines.manage:status",
    "stop": "specops.engines.manage:stop",
    "restart": "specops.engines.manage:restart",
    "promote": "specops.k8s:promote",
    "rollback": "specops.k8s:rollback",
    # lineage
    "open_registry": "specops.registry:open_registry",
    # measure
    "measure": "specops.metrics.measure:measure",
    "adopt": "specops.metrics.adopt:adopt",
    "bench": "specops.benchmark.plan:bench_deployment",
    "doctor": "specops.metrics.doctor:doctor",
    # validate
    "validate": "specops.checks.api:validate",
    "gate": "specops.checks.api:gate",
    # tune
    "tune": "specops.tune.api:tune",
    # watch and heal
    "run_runbook": "specops.drift.service:run_runbook_on",
    "heal": "specops.heal:heal",
}

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
