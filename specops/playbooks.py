"""Locate the playbooks folder (data files shipped with specops).

Installed wheels carry it as ``specops/_playbooks``; a source checkout (editable install) uses the
repository's ``playbooks/``. ``SPECOPS_PLAYBOOKS`` overrides both (for site-specific playbooks).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def _default_dir() -> Path:
    here = Path(__file__).resolve().parent
    packaged = here / "_playbooks"
    if packaged.is_dir():
        return packaged
    return here.parent / "playbooks"


def playbooks_dir() -> Path:
    env = os.environ.get("SPECOPS_PLAYBOOKS")
    return Path(env) if env else _default_dir()


def playbook_path(*parts: str) -> Path:
    """A file or folder of the playbooks; one that exists but is a FIFO, a device or a socket (reading
    it would block or never end) is a ConfigFileError (exit 2)."""
    path = playbooks_dir().joinpath(*parts)
    try:
        mode = path.stat().st_mode
    except (OSError, ValueError):
        return path  # absent or unusable: the reader says so
    import stat

    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        from specops.errors import ConfigFileError

        raise ConfigFileError("is not a regular file (a FIFO, a device or a socket)",
                              "point SPECOPS_PLAYBOOKS at a folder of ordinary files", path=str(path))
    return path
