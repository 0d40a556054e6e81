"""Results computed from the shipped inputs, kept in ``$SPECOPS_HOME/cache/<kind>-<key>.cache``.

The key covers every input: the playbooks (catalogs, published rows, decision tree, capability table),
the planner's code and the Python and pydantic releases, by name, size and modification time (a stat,
not a read: cheap on every run).
A changed row, catalog entry or formula gives a new key, so the result is computed again; a cache
that cannot be read or written only costs the computation.

**Nothing planted runs.** The results are pickled (pydantic models; a JSON round trip would cost
more than the computation it saves), and a pickle can run code when it is loaded, so each file is
signed: ``MAGIC``, then a keyed BLAKE2b tag (:data:`TAG_BYTES`) over the kind, the input key and the
pickled bytes, then those bytes. The 32-byte key is made once from ``os.urandom`` and kept in
``$SPECOPS_HOME/cache.key`` (mode 0600, outside the cache folder); a key file that is not this
user's, is readable by others or is not 32 bytes is never trusted (nothing is read from the cache
or written to it then). A file whose tag does not verify — planted, truncated, corrupt, from another
home — is never unpickled: the result is computed again and the file replaced.
"""

from __future__ import annotations

import os
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


MAGIC = b"specops-cache-v2\n"
TAG_BYTES = 32
KEY_FILE = "cache.key"


def _cache_key_bytes() -> bytes | None:
    """The signing key (created on first use); None when the key file cannot be trusted or made."""
    from specops.settings import specops_home

    path = specops_home() / KEY_FILE
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return _new_key(path)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (st.st_uid != os.getuid() or st.st_mode & 0o077 or st.st_size != TAG_BYTES
                or not (st.st_mode & 0o170000) == 0o100000):  # this user's regular file, private, 32 bytes
            return None
        key = os.read(fd, TAG_BYTES + 1)
    finally:
        os.close(fd)
    return key if len(key) == TAG_BYTES else None


def _new_key(path) -> bytes | None:
    key = os.urandom(TAG_BYTES)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:  # another process made it first: use theirs
        return _cache_key_bytes()
    except OSError:
        return None
    try:
        os.write(fd, key)
    finally:
        os.close(fd)
    return key


def _tag(key: bytes, kind: str, inputs: str, payload: bytes) -> bytes:
    from _blake2 import blake2b  # the builtin module: hashlib would load OpenSSL (~5 ms)

    h = blake2b(key=key, digest_size=TAG_BYTES, person=b"specops-cache")
    h.update(f"{kind}\0{inputs}\0".encode())
    h.update(payload)
    return h.digest()


def _read(path, key: bytes, kind: str, inputs: str):
    """The unpickled result when the file's tag verifies; ``_MISS`` otherwise (never unpickled then)."""
    from _operator import _compare_digest  # what hmac.compare_digest is, without importing hmac

    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError:
        return _MISS
    head = len(MAGIC) + TAG_BYTES
    if len(blob) <= head or not blob.startswith(MAGIC):
        return _MISS
    payload = blob[head:]
    if not _compare_digest(blob[len(MAGIC):head], _tag(key, kind, inputs, payload)):
        return _MISS
    import pickle

    try:
        return pickle.loads(payload)  # noqa: S301 - signed by this home's key above
    except Exception:  # noqa: BLE001 - written by another release of a dependency: recompute
        return _MISS


_MISS = object()


def cached(kind: str, compute: Callable[[], T]) -> T:
    """``compute()``, or its result from an earlier run with the same inputs (a signed file; see the
    module docstring)."""
    from specops.settings import cache_dir

    key = _cache_key_bytes()
    if key is None:
        return compute()
    inputs = input_key()
    path = cache_dir() / f"{kind}-{inputs}.cache"
    out = _read(path, key, kind, inputs)
    if out is not _MISS:
        return out
    out = compute()
    import pickle

    try:
        payload = pickle.dumps(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)  # never written through a planted link: a new file, or nothing
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + _tag(key, kind, inputs, payload) + payload)
        tmp.replace(path)
        for pattern in (f"{kind}-*.cache", f"{kind}-*.pickle"):  # stale results, and unsigned ones of old releases
            for stale in path.parent.glob(pattern):
                if stale != path:
                    stale.unlink(missing_ok=True)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):  # read-only home / unpicklable: recompute
        pass
    return out
