"""Manifests of a deployment spec: render every object, validate it offline, write the folder
(``<name>/*.yaml`` plus ``kustomization.yaml``) that `specops deploy --platform kubernetes --dry-run`
and GitOps users keep."""

from __future__ import annotations

import json
from pathlib import Path

from specops.k8s.alerts import AlertThresholds

HEADER = "# Rendered by specops from the deployment spec; edit the spec, not this file.\n"
_FILE_NAMES = {"PersistentVolumeClaim": "pvc", "Deployment": "deployment", "Service": "service",
               "PodMonitor": "podmonitor", "PrometheusRule": "prometheusrule",
               "LLMInferenceService": "llminferenceservice"}


def render_manifests(spec, *, canary_of: str | None = None, replicas: int | None = None,
                     thresholds: AlertThresholds | dict | None = None, monitoring: bool = True) -> list[dict]:
    """Render every object for ``spec`` and validate each offline; raises InputError on the first problem."""
    from specops.k8s.render import render_objects
    from specops.k8s.validate import validate_objects

    if isinstance(thresholds, dict):
        thresholds = AlertThresholds.model_validate(thresholds)
    objs = render_objects(spec, canary_of=canary_of, replicas=replicas, thresholds=thresholds,
                          monitoring=monitoring)
    objs = json.loads(json.dumps(objs))  # plain data, no shared sub-objects
    validate_objects(objs)
    return objs


def _dump(obj: dict) -> str:
    import yaml

    class _Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data) -> bool:  # noqa: ARG002
            return True

    def _str(dumper, data: str):
        style = "|" if "\n" in data else None  # PromQL stays readable
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    _Dumper.add_representer(str, _str)
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)


def write_manifests(objs: list[dict], out_dir: str | Path) -> list[Path]:
    """Write ``out_dir/<name>/<kind>.yaml`` per object plus ``kustomization.yaml``; returns the paths.

    ``<name>`` is the deployment the objects belong to (their ``specops.io/deployment`` label). YAML
    files that specops wrote earlier into that folder and no longer renders are removed.
    """
    from specops.k8s.render import LABEL_DEPLOYMENT

    names = {o["metadata"]["labels"][LABEL_DEPLOYMENT] for o in objs if o["kind"] == "Deployment"}
    name = next(iter(names)) if len(names) == 1 else objs[0]["metadata"]["name"]
    folder = Path(out_dir) / name
    folder.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for obj in objs:
        path = folder / f"{_FILE_NAMES.get(obj['kind'], obj['kind'].lower())}.yaml"
        path.write_text(HEADER + _dump(obj))
        paths.append(path)
    kustomization = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                     "resources": [p.name for p in paths]}
    kpath = folder / "kustomization.yaml"
    kpath.write_text(HEADER + _dump(kustomization))
    paths.append(kpath)
    for stale in folder.glob("*.yaml"):
        if stale not in paths and stale.read_text().startswith(HEADER):
            stale.unlink()
    return paths
