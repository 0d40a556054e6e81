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

import sys


def main(argv: list[str] | None = None) -> int:
    from specops.heal import heal
    from specops.retrain.worker import run_job

    return run_job(argv, prog="python -m specops.heal.worker", description=__doc__.splitlines()[0],
                   deployment_help="Deployment to heal.", dry_run=True,
                   call=lambda a, reg: heal(a.deployment, data=a.data, from_traffic=a.from_traffic, registry=reg,
                                            reason=a.reason, dry_run=a.dry_run))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
