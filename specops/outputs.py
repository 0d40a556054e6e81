"""Files specops writes (``report --out``, ``tune --html``, ``lineage export --file``, ``bench --save``,
``validate --junit``): checked before any work starts, written so that a failure leaves nothing half
done.

- :func:`check_output`: the path is absent or a regular file (never a FIFO, a device or a socket,
  which would block or swallow the write), its folder exists (or can be made) and is writable, its
  name fits the file system. A *default* name — one the user did not type, such as
  ``<deployment>-report.html`` — must not be a symbolic link at all: a link planted there would
  make specops write wherever it points.
- :func:`write_text`: the text goes to a new temporary file beside the target (created exclusively,
  never through a link), then replaces the target in one rename; a failed write removes the
  temporary file and leaves the target as it was. A path the user typed that is a link to a regular
  file is written at the link's target.

Errors are :class:`~specops.errors.InputError` naming the flag (exit 2).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from specops.errors import InputError

_KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket"}


def _shown(path: str | Path) -> str:
    return str(path)[:120].encode("unicode_escape").decode()


def check_output(path: str | Path, flag: str, *, makes_folders: bool = False, default: bool = False) -> Path:
    """Refuse an output path that cannot or must not be written, before any work starts (exit 2).
    ``makes_folders``: the writer creates missing parent folders, so the nearest existing one must be
    writable. ``default``: the name was chosen by specops, not typed: a symbolic link is refused."""
    p = Path(path)
    problem = None
    try:
        if default and p.is_symlink():
            problem = "is a symbolic link (a default output name is never written through one)"
        elif p.exists() and not p.is_dir():
            kind = _KINDS.get(stat.S_IFMT(p.stat().st_mode))
            if kind:
                problem = f"is {kind}, not a regular file"
        if problem is None:
            parent = p.parent if str(p.parent) else Path(".")
            while makes_folders and not parent.exists() and parent != parent.parent:
                parent = parent.parent
            problem = ("is a folder" if p.is_dir() else
                       "has a file name longer than 255 bytes" if len(p.name.encode("utf-8", "surrogateescape")) > 255
                       else f"is in {_shown(parent)}, which is not a folder" if not parent.is_dir() else
                       f"is in {_shown(parent)}, which is not writable" if not os.access(parent, os.W_OK) else
                       "exists and is not writable" if p.exists() and not os.access(p, os.W_OK) else None)
    except (OSError, ValueError) as exc:
        problem = f"cannot be used ({exc.__class__.__name__})"
    if problem:
        fix = (f"remove the link or pass {flag} with the file you mean" if "symbolic link" in problem else
               f"give {flag} a regular file path (or a new one)" if "not a regular file" in problem else
               f"give {flag} a writable file path")
        raise InputError(f'{flag} "{_shown(path)}" {problem}', fix)
    return p


def write_text(path: str | Path, text: str, flag: str, *, what: str = "file", default: bool = False,
               make_folders: bool = False) -> Path:
    """Write ``text`` to ``path`` all at once (a temporary file renamed over it); see the module docstring."""
    p = check_output(path, flag, makes_folders=make_folders, default=default)
    try:
        if make_folders:
            p.parent.mkdir(parents=True, exist_ok=True)
        target = p.resolve() if (not default and p.is_symlink()) else p
        check_output(target, flag)
        tmp = target.with_name(f".{target.name[:200]}.{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except (OSError, UnicodeError) as exc:
        raise InputError(f"cannot write the {what} {_shown(p)} ({getattr(exc, 'strerror', None) or exc.__class__.__name__})",
                         f"pass a writable {flag} path") from None
    return p
