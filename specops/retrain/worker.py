"""A retraining job in a process of its own: what the monitor's ``open_retraining`` action starts,
detached, as ``python -m specops.retrain.worker --deployment NAME ...``.

It calls the library (:func:`specops.retrain.driver.retrain`, the same call as `specops retrain`
with its defaults), never the CLI. The outcome is printed as JSON to the job's log; a failure is one
``error: ... To fix: ...`` line and the error's exit code (2 bad input or a lease held, 3 internal).
"""

from __future__ import annotations

import argparse
import sys


def run_job(argv: list[str] | None, *, prog: str, description: str, deployment_help: str, call,
            dry_run: bool = False) -> int:
    """The worker's shell, shared with specops.heal.worker: ``--deployment``, ``--reason``, ``--data`` or
    ``--from-traffic``, ``--db`` (and ``--dry-run`` when ``dry_run``); ``call(args, registry)`` runs the
    library; its outcome is printed as JSON, a SpecopsError as one line with its exit code."""
    from specops.errors import SpecopsError
    from specops.registry import open_registry

    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--deployment", required=True, help=deployment_help)
    p.add_argument("--reason", default=None, help="Why (recorded in the event log).")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", default=None, help="JSONL prompts file.")
    src.add_argument("--from-traffic", action="store_true", help="The deployment's recorded prompts.")
    if dry_run:
        p.add_argument("--dry-run", action="store_true", help="Print the plan, change nothing.")
    p.add_argument("--db", default=None, help="Registry URL or SQLite path (default: SPECOPS_DB / SPECOPS_HOME).")
    args = p.parse_args(argv)
    try:
        with open_registry(args.db) as reg:
            outcome = call(args, reg)
    except SpecopsError as exc:
        print(f"error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    print(outcome.model_dump_json(indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    from specops.retrain.driver import retrain

    return run_job(argv, prog="python -m specops.retrain.worker", description=__doc__.splitlines()[0],
                   deployment_help="Deployment whose draft to retrain.",
                   call=lambda a, reg: retrain(a.deployment, data=a.data, from_traffic=a.from_traffic, registry=reg,
                                               reason=a.reason))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
