"""Drift: acceptance detectors, cause classifier, adaptive γ, policies, the monitor loop, runbooks.

Modules: ``observe`` (what a cycle sees), ``tracegen`` (seeded synthetic traces), ``detectors``
(floors, CUSUM), ``classify`` (which cause), ``gamma`` (adaptive γ), ``policy`` (playbook policies and
idempotent actions), ``monitor`` (the control loop), ``runbooks`` (executable on-call runbooks).
"""
