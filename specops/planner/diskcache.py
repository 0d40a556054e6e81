"""Results computed from the shipped inputs, kept in ``$SPECOPS_HOME/cache/<kind>-<key>.pickle``.

The key covers every input: the playbooks (catalogs, published rows, decision tree, capability table),
the planner's code and the Python and pydantic releases, by name, size and modification time (a stat,
not a read: cheap on every run).
A changed row, catalog entry or formula gives a new key, so the result is computed again; a cache
that cannot be read or written only costs the computation.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def input_key() -> str:
    """A hash of every input file's name, size and mtime (the playbooks folder may be overridden per run)."""
    from specops.playbooks import playbooks_dir

    return _key(str(playbooks_dir()))


@lru_cache(maxsize=4)
def _key(playbooks: str) -> str:
    import sys
    import zlib  # not hashlib: loading OpenSSL costs more than the whole key
    from importlib.util import find_spec

    here = Path(__file__).resolve().parent
    files = sorted([*here.glob("*.py"), *(here.parent / n for n in ("speculation.py", "capabilities.py", "models.py")),
                    *Path(playbooks).rglob("*.*")])
    pyd = find_spec("pydantic")  # pickled models are pydantic's: another pydantic release recomputes
    if pyd is not None and pyd.origin:
        files.append(Path(pyd.origin).parent / "version.py")
    lines = [sys.version]
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue
        lines.append(f"{f}\0{st.st_size}\0{st.st_mtime_ns}")
    text = "\n".join(lines).encode()
    return f"{zlib.crc32(text):08x}{zlib.adler32(text):08x}"


def cached(kind: str, compute: Callable[[], T]) -> T:
    """``compute()``, or its pickled result from an earlier run with the same inputs."""
    from specops.settings import cache_dir

    path = cache_dir() / f"{kind}-{input_key()}.pickle"
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        pass
    out = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps(out))
        tmp.replace(path)
        for stale in path.parent.glob(f"{kind}-*.pickle"):  # results of inputs that changed since
            if stale != path:
                stale.unlink(missing_ok=True)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):  # read-only home / unpicklable: recompute
        pass
    return out
