"""The library's source, parsed once per test session for the tests that read it (layers, "one of each",
the environment and loop checks): parsing all of specops/ costs ≈ 1-2 s, and those tests read every file
many times over. A file is parsed again when its size or modification time changed; callers only read
the trees (``ast.walk``, ``ast.unparse``), never change them."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.cache
def _parsed(path: str, mtime_ns: int, size: int) -> tuple[str, ast.Module]:
    src = Path(path).read_text(encoding="utf-8")
    return src, ast.parse(src, filename=path)


def _key(path: Path) -> tuple[str, int, int]:
    st = Path(path).stat()
    return str(path), st.st_mtime_ns, st.st_size


def source(path: Path) -> str:
    """The text of ``path`` (UTF-8)."""
    return _parsed(*_key(path))[0]


def parsed(path: Path) -> ast.Module:
    """``ast.parse`` of ``path``, shared by every caller in this session: read it, do not change it."""
    return _parsed(*_key(path))[1]
