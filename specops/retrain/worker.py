"""A retraining job in a process of its own: what the monitor's ``open_retraining`` action starts,
detached, as ``python -m specops.retrain.worker --deployment NAME ...``.

It calls the library (:func:`specops.retrain.driver.retrain`, the same call as `specops retrain`
with its defaults), never the CLI. The outcome is printed as JSON to the job's log; a failure is one
``error: ... To fix: ...`` line and the error's exit code (2 bad input or a lease held, 3 internal).
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from specops.errors import SpecopsError
    from specops.registry import open_registry
    from specops.retrain.driver import retrain

    p = argparse.ArgumentParser(prog="python -m specops.retrain.worker", description=__doc__.splitlines()[0])
    p.add_argument("--deployment", required=True, help="Deployment whose draft to retrain.")
    p.add_argument("--reason", default=None, help="Why (recorded in the event log).")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", default=None, help="JSONL prompts file.")
    src.add_argument("--from-traffic", action="store_true", help="The deployment's recorded prompts.")
    p.add_argument("--db", default=None, help="Registry URL or SQLite path (default: SPECOPS_DB / SPECOPS_HOME).")
    args = p.parse_args(argv)
    try:
        with open_registry(args.db) as reg:
            outcome = retrain(args.deployment, data=args.data, from_traffic=args.from_traffic, registry=reg,
                              reason=args.reason)
    except SpecopsError as exc:
        print(f"error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    print(outcome.model_dump_json(indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
