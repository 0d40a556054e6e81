"""What `specops promote` and `specops rollback` call: finish or undo a Kubernetes canary
(specops.k8s; a canary is started by `specops deploy SPEC --platform kubernetes --canary-of STABLE`)."""

from __future__ import annotations

from collections.abc import Callable


def _require_kubernetes(name: str, command: str) -> None:
    """Refuse ``promote``/``rollback`` of a deployment the registry records elsewhere, before any cluster
    credentials are looked for: the fix fits where it runs (a local canary is heal's; an adopted engine is
    changed where it runs). A name the registry does not know is left to the cluster (it may be unrecorded)."""
    from specops.errors import InputError, NotFoundError, SpecopsError

    try:
        from specops.registry import open_registry

        with open_registry() as reg:
            row = reg.get_deployment(name)
    except NotFoundError:
        return
    except SpecopsError:  # no usable registry: the cluster still knows its canaries
        return
    if row.platform == "kubernetes":
        return
    if row.status == "adopted" or row.platform == "external":
        raise InputError(f"deployment {name} is an adopted engine (not started by specops), not a Kubernetes "
                         f"canary: there is nothing to {command}",
                         "change its draft where it runs, then record it with `specops deployment register "
                         f"{name} --endpoint URL --draft NAME@VERSION`")
    raise InputError(f"deployment {name} is a local process, not a Kubernetes canary: there is nothing to {command}",
                     f"a local deployment changes its draft with `specops heal --deployment {name} --data FILE` "
                     f"(canary, then promote or roll back; add --dry-run to see the plan)")


def promote(name: str, *, namespace: str | None = None, timeout_s: float = 600,
            progress: Callable[[str], None] | None = None) -> list[str]:
    """Make a canary's configuration the stable's, wait for the rollout, delete the canary; lines to print."""
    _require_kubernetes(name, "promote")
    from specops.k8s import promote as run

    return run(name, namespace=namespace, timeout_s=timeout_s, progress=progress)


def rollback(name: str, *, namespace: str | None = None, progress: Callable[[str], None] | None = None) -> list[str]:
    """Delete a canary (its stable keeps serving all traffic); lines to print."""
    _require_kubernetes(name, "roll back")
    from specops.k8s import rollback as run

    return run(name, namespace=namespace, progress=progress)
