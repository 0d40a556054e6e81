"""Drift: acceptance detectors, cause classifier, adaptive γ, policies, the monitor loop, runbooks.

Modules: ``observe`` (what a cycle sees), ``tracegen`` (seeded synthetic traces), ``detectors``
(floors, CUSUM), ``classify`` (which cause), ``gamma`` (adaptive γ), ``policy`` (playbook policies and
idempotent actions), ``monitor`` (the control loop), ``runbooks`` (executable on-call runbooks).
Wiring to the rest of specops: ``store`` (history and baselines in the registry), ``fleet`` (watch
targets and live target fingerprints from the registry), ``sources`` (Prometheus and direct
``/metrics``), ``actions`` (engine actions, the registry as event log), ``steps`` (the real runbook
steps) and ``service`` (what ``specops monitor`` / ``specops runbook`` call).
"""
