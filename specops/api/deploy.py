"""What `specops deploy`, `status`, `logs`, `stop` and `restart` call: a deployment's life.

``deploy`` chooses the platform (the spec's, or the one asked for) and hands the spec to the local
process launcher (specops.engines.deploy) or to Kubernetes (specops.k8s); the day-2 operations are
specops.engines.manage's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from specops.engines.manage import DeploymentStatus, log_path, restart, status, status_exit_code, stop, tail
from specops.errors import InputError

__all__ = ["DeploymentStatus", "deploy", "follow_log", "log_path", "restart", "status", "status_exit_code", "stop",
           "tail"]

PLATFORMS = ("local", "kubernetes")


def deploy(spec_file: str | Path, *, platform: str | None = None, dry_run: bool = False, force: bool = False,
           reason: str | None = None, canary_of: str | None = None, replicas: int | None = None,
           check: bool = True, progress: Callable[[str], None] | None = None, force_conflicts: bool = False,
           server_dry_run: bool = False):
    """Deploy the spec in ``spec_file`` on its platform (or ``platform``); returns the launch result
    (``DeployResult`` locally, ``KubeDeployResult`` on Kubernetes), each with ``summary_lines()``.

    Kubernetes only: ``force_conflicts`` takes over fields another field manager owns;
    ``server_dry_run`` has the API server check every object without storing it."""
    from specops.engines.spec import load_spec
    from specops.models import check_deployment_name

    if canary_of is not None:  # a label value and an object name: the one name rule, before anything renders
        check_deployment_name(canary_of, "--canary-of")
    spec = load_spec(spec_file)
    where = (platform or spec.platform).lower()
    if where not in PLATFORMS:
        raise InputError(f'unknown platform "{platform}"', "use --platform local or --platform kubernetes")
    if where == "kubernetes":
        from specops.k8s import deploy_kubernetes  # a missing extra is named by the CLI (exit 2)

        return deploy_kubernetes(spec, dry_run=dry_run, canary_of=canary_of, replicas=replicas, out_dir=None,
                                 progress=progress, force_conflicts=force_conflicts, server_dry_run=server_dry_run)
    if canary_of or replicas is not None or force_conflicts or server_dry_run:
        raise InputError("--canary-of, --replicas, --force-conflicts and --server-dry-run apply to Kubernetes only",
                         "add --platform kubernetes, or drop them")
    from specops.engines.deploy import deploy_local

    return deploy_local(spec, spec_path=spec_file, dry_run=dry_run, force=force, reason=reason, check=check,
                        progress=progress)


def follow_log(name: str, *, poll_s: float = 0.5, sleep: Callable[[float], None] | None = None) -> Iterator[str]:
    """New lines of a local deployment's engine log as they are written (until the caller stops)."""
    import time

    sleep = sleep or time.sleep
    with open(log_path(name), errors="replace") as fh:
        fh.seek(0, 2)
        while True:
            chunk = fh.readline()
            if chunk:
                yield chunk
            else:
                sleep(poll_s)
