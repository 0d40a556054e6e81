"""`specops promote NAME` and `specops rollback NAME`: finish or undo a Kubernetes canary.

(`specops deploy SPEC --platform kubernetes [--canary-of STABLE --replicas N]` starts one.)
"""

from __future__ import annotations

import typer


def _progress(message: str) -> None:
    from specops.cli.output import progress

    progress(message)


def register(app: typer.Typer) -> None:
    @app.command("promote")
    def promote_cmd(
        name: str = typer.Argument(..., help="The canary to promote (deployed with --canary-of)."),
        namespace: str = typer.Option(None, "--namespace", "-n",
                                      help="Namespace (default: from the registry, else 'default')."),
        timeout: float = typer.Option(600, "--timeout", help="Seconds to wait for the stable's rollout."),
    ) -> None:
        """Make a canary's configuration the stable's, wait for the rollout, then delete the canary."""
        from specops.api.kube import promote

        for line in promote(name, namespace=namespace, timeout_s=timeout, progress=_progress):
            typer.echo(line)

    @app.command("rollback")
    def rollback_cmd(
        name: str = typer.Argument(..., help="The canary to remove (deployed with --canary-of)."),
        namespace: str = typer.Option(None, "--namespace", "-n",
                                      help="Namespace (default: from the registry, else 'default')."),
    ) -> None:
        """Delete a canary; its stable keeps serving all traffic."""
        from specops.api.kube import rollback

        for line in rollback(name, namespace=namespace, progress=_progress):
            typer.echo(line)
