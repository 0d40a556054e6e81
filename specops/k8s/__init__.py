"""Kubernetes: validated manifests, server-side apply, canary and promotion.

The only package that imports ``kubernetes`` (lazily, inside functions). Public API::

    render_manifests(spec, canary_of=None, replicas=None, thresholds=None) -> list[dict]
    write_manifests(objs, out_dir) -> list[Path]          # out_dir/<name>/*.yaml + kustomization.yaml
    deploy_kubernetes(spec, dry_run=False, ...) -> KubeDeployResult
    promote(name), rollback(name)
"""

from __future__ import annotations

from specops.k8s.alerts import AlertThresholds
from specops.k8s.deploy import KubeDeployResult, deploy_kubernetes, promote, rollback
from specops.k8s.manifests import render_manifests, write_manifests

__all__ = ["AlertThresholds", "KubeDeployResult", "deploy_kubernetes", "promote", "render_manifests", "rollback",
           "write_manifests"]
