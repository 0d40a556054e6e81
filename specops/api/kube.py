"""What `specops promote` and `specops rollback` call: finish or undo a Kubernetes canary
(specops.k8s; a canary is started by `specops deploy SPEC --platform kubernetes --canary-of STABLE`)."""

from __future__ import annotations

from collections.abc import Callable


def promote(name: str, *, namespace: str | None = None, timeout_s: float = 600,
            progress: Callable[[str], None] | None = None) -> list[str]:
    """Make a canary's configuration the stable's, wait for the rollout, delete the canary; lines to print."""
    from specops.k8s import promote as run

    return run(name, namespace=namespace, timeout_s=timeout_s, progress=progress)


def rollback(name: str, *, namespace: str | None = None, progress: Callable[[str], None] | None = None) -> list[str]:
    """Delete a canary (its stable keeps serving all traffic); lines to print."""
    from specops.k8s import rollback as run

    return run(name, namespace=namespace, progress=progress)
