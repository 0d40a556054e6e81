"""A heal in a process of its own: what the monitor's ``open_retraining`` action starts, detached,
when its policy asks for the whole loop (``heal: true``), as ``python -m specops.heal.worker
--deployment NAME ...``.

It calls the library (:func:`specops.heal.heal`, the same call as `specops heal` with its defaults:
hand-over ``restart``), never the CLI: retrain → train-stage validation → engine canary → promote or
roll back, under the heal's lease (one heal per deployment; a second is refused with the holder's
name) and the retraining lease inside it. The outcome is printed as JSON to the job's log; a failure
is one ``error: ... To fix: ...`` line and the error's exit code (2 bad input or a lease held, 3
internal).
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from specops.errors import SpecopsError
    from specops.heal import heal
    from specops.registry import open_registry

    p = argparse.ArgumentParser(prog="python -m specops.heal.worker", description=__doc__.splitlines()[0])
    p.add_argument("--deployment", required=True, help="Deployment to heal.")
    p.add_argument("--reason", default=None, help="Why (recorded in the event log).")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", default=None, help="JSONL prompts file.")
    src.add_argument("--from-traffic", action="store_true", help="The deployment's recorded prompts.")
    p.add_argument("--dry-run", action="store_true", help="Print the plan, change nothing.")
    p.add_argument("--db", default=None, help="Registry URL or SQLite path (default: SPECOPS_DB / SPECOPS_HOME).")
    args = p.parse_args(argv)
    try:
        with open_registry(args.db) as reg:
            outcome = heal(args.deployment, data=args.data, from_traffic=args.from_traffic, registry=reg,
                           reason=args.reason, dry_run=args.dry_run)
    except SpecopsError as exc:
        print(f"error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    print(outcome.model_dump_json(indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
