"""Checks: checklists (playbooks/checklists/*.yaml) and threshold profiles evaluated against a
deployment's live metrics, benchmarks and lineage, with pass / fail / could-not-evaluate verdicts,
JUnit and HTML reports. ``run.validate`` runs one checklist and records it; `specops gate` is
orchestrated in specops.api.validate. Importing this package loads nothing heavy."""
