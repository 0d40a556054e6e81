"""Where state lives and how settings resolve.

Precedence for every setting: command-line flag, then ``SPECOPS_<NAME>`` environment variable,
then ``$SPECOPS_HOME/config.yaml``, then the built-in default.

- ``SPECOPS_HOME``: defaults to ``$XDG_DATA_HOME/specops`` (``~/.local/share/specops``).
- Registry: ``$SPECOPS_HOME/specops.db`` unless ``SPECOPS_DB`` (any SQLAlchemy URL) is set.
- Per-deployment state: ``$SPECOPS_HOME/deployments/<name>/``.
- Caches (built test models, compile caches): ``$SPECOPS_HOME/cache/``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def specops_home() -> Path:
    env = os.environ.get("SPECOPS_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "specops"


def cache_dir() -> Path:
    return specops_home() / "cache"


def deployments_dir() -> Path:
    return specops_home() / "deployments"


def deployment_dir(name: str) -> Path:
    return deployments_dir() / name


def _config_file_values() -> dict[str, Any]:
    path = specops_home() / "config.yaml"
    if not path.is_file():
        return {}
    from specops.yamlfile import load_yaml

    data = load_yaml(path)
    if not isinstance(data, dict):
        from specops.errors import ConfigFileError

        raise ConfigFileError("config.yaml must be a mapping of setting names to values",
                              "write `key: value` lines, e.g. `prometheus_url: http://...`",
                              path=str(path))
    return {str(k).lower().replace("-", "_"): v for k, v in data.items()}


def setting(name: str, flag_value: Any = None, default: Any = None) -> Any:
    """Resolve one setting: flag > SPECOPS_<NAME> > config.yaml > default."""
    if flag_value is not None:
        return flag_value
    env = os.environ.get("SPECOPS_" + name.upper())
    if env is not None and env != "":
        return env
    values = _config_file_values()
    if name.lower() in values and values[name.lower()] is not None:
        return values[name.lower()]
    return default


def database_url(flag_value: str | None = None) -> str:
    """The registry URL: --db, SPECOPS_DB, config.yaml `db`, else SQLite in SPECOPS_HOME."""
    url = setting("db", flag_value)
    if url:
        url = str(url)
        if "://" not in url:  # a plain path means a SQLite file
            url = "sqlite:///" + str(Path(url).expanduser().resolve())
        return url
    return "sqlite:///" + str(specops_home() / "specops.db")
