"""What each command's exit code means: the table docs/cli.md renders ("Exit codes" under each command,
scripts/gen_cli_docs.py) and tests/cli/test_exit_codes.py holds the commands to. Every command also exits
2 for bad input (one line with "To fix:"), 3 for an internal error and 130 when interrupted (specops.cli.main);
a command without a row here has only those and 0 for done."""

from __future__ import annotations

COMMON = "2 bad input (one line: what is wrong, then To fix); 3 internal error; 130 interrupted."

EXIT_CODES: dict[str, str] = {
    "recommend": "0 a plan was printed; 2 bad input, or nothing could be recommended (said why).",
    "deploy": "0 deployed (or the dry run printed); 1 the lineage gate found the target/draft pair incompatible "
              "(--force --reason overrides); 2 bad spec, port in use, an engine that exited or did not answer "
              "during start-up (the last lines of its log are shown), a missing Kubernetes extra or credentials.",
    "status": "0 every deployment that should be serving answered its health check (stopped ones are shown as "
              "stopped and not probed); 1 some did not (unreachable, an HTTP error, its process gone: each named on "
              "stderr), including when none of them answered; 2 nothing was checked (no deployments in this "
              "registry, or every one stopped or without an endpoint), or an unknown name.",
    "logs": "0 the log was printed; 2 an unknown deployment, or one whose log specops does not hold (adopted: read "
            "it where the engine runs; Kubernetes: `kubectl logs`).",
    "stop": "0 stopped (or was not running); 2 an unknown deployment, or one not started by specops as a local "
            "process (adopted: stop it where it runs; Kubernetes: kubectl or `specops rollback`).",
    "restart": "0 restarted; 1 the lineage gate refused the pair; 2 as `stop`, or no saved spec, or the engine did "
               "not come back.",
    "metrics": "0 measured; 2 nothing trustworthy could be measured (unreachable endpoint or Prometheus, missing "
               "metrics).",
    "bench": "0 measured (a speedup whose 95% interval spans 1x says \"too few requests to tell\": not a pass, but "
             "a measurement); 1 the engine's counters disagree with what the client received; 2 nothing could be "
             "measured.",
    "completion": "0 the completion script was printed (or installed with --install); 2 an unknown shell.",
    "doctor": "0 every line is ok (or information); 1 a line is a problem; 2 a line could not be evaluated and "
              "none is a problem.",
    "validate": "0 every check passed (warn lines may be shown); 1 a check of severity error ran and failed; 2 a "
                "check could not be evaluated and none failed, or no check ran at all.",
    "gate": "as `validate`, over the gate's checks and (with --endpoint) the deploy checklist: the highest code.",
    "report": "0 the HTML file was written; 2 unknown deployment or unwritable path.",
    "tune": "0 done (failed points are in the report); 2 nothing could be measured.",
    "monitor": "with --once: 0 the cycle saw every watched deployment (at least one); 2 it could not see some "
               "(each named on stderr), the metrics source failed, or there was nothing to watch (an empty "
               "registry, or the wrong one: the registry is named). The loop runs until interrupted (130).",
    "retrain": "0 the candidate was trained, registered and checked (the decision is printed: promote or "
               "rollback), or the dry run printed; 2 a retraining job already running (the holder is named), a step "
               "failed, or the deployment records no target (the fix fits how it runs).",
    "heal": "0 the run ended (promoted, or rolled back with the reason), or the dry run printed; 2 a heal or "
            "retraining job already running, a step failed (the incumbent keeps serving), or a deployment heal "
            "does not drive (adopted, Kubernetes: the fix names what to run).",
    "promote": "0 promoted; 2 not a Kubernetes canary (a local or adopted deployment: the fix names what to run "
               "instead), no cluster credentials, or the rollout did not finish.",
    "rollback": "0 the canary was deleted; 2 as `promote`.",
    "lineage check": "0 compatible; 1 incompatible; 2 could not evaluate.",
    "runbook run": "0 every step ran (whatever it found); 2 a step could not evaluate (engine down, no traffic, "
                   "no baseline).",
    "deployment register": "0 recorded; 2 unreachable engine (unless --no-check), several served models without "
                           "--served-name, or a name specops already deployed.",
    "deployment remove": "0 removed (or retired: history kept); 2 the deployment still runs (stop it first).",
}


def exit_codes(command: str) -> str:
    """The exit codes of ``command`` (its path without "specops"), in words."""
    return f"{EXIT_CODES.get(command, '0 done.')} Always: {COMMON}"
