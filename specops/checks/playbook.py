"""Load checklists and profiles (strict YAML; one line with file, line and ``To fix:`` on any problem)."""

from __future__ import annotations

from pathlib import Path

from specops.checks.types import Checklist, Profile, Profiles
from specops.errors import unknown
from specops.playbooks import playbook_path

STAGES = ("train", "deploy", "ops")


def checklist_path(name_or_path: str) -> Path:
    """``deploy`` -> playbooks/checklists/deploy.yaml; a path ending in .yaml/.yml is used as given."""
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path:
        return Path(name_or_path)
    if name_or_path not in STAGES:
        raise unknown("checklist", name_or_path, STAGES, fix="use --checklist train|deploy|ops or a YAML path")
    return playbook_path("checklists", f"{name_or_path}.yaml")


def load_checklist(name_or_path: str) -> Checklist:
    from specops.yamlfile import load_model

    return load_model(checklist_path(name_or_path), Checklist)


def load_profiles(path: str | Path | None = None) -> Profiles:
    from specops.yamlfile import load_model

    return load_model(path or playbook_path("profiles.yaml"), Profiles)


def get_profile(name: str, path: str | Path | None = None) -> Profile:
    profiles = load_profiles(path).profiles
    if name not in profiles:
        raise unknown("profile", name, profiles, fix="use --profile " + "|".join(sorted(profiles)))
    return profiles[name]
