"""Strict JSON loading for every JSON file or text specops reads (model config.json and tokenizer.json,
tune run.json, ``--data`` lines, ``retrain --params``, ``lineage import`` files, workloads), the JSON
twin of :mod:`specops.yamlfile`.

- Bounded: a file larger than its limit (:data:`MAX_BYTES` unless the caller says otherwise) is
  refused before it is read; nesting deeper than :data:`MAX_DEPTH` is refused (never a
  RecursionError, however deep the input).
- Finite: ``NaN``, ``Infinity`` and numbers that overflow to infinity (``1e400``) are refused, and so
  is an integer of more than 4,300 digits (Python's conversion limit).
- Typed: :class:`JsonObject` reads one key at a time as the type and range the caller needs
  (``doc.int("num_attention_heads", 1, 1 << 20)``); :func:`validate_json` checks a whole document
  against a pydantic model.
- Every error is one :class:`~specops.errors.ConfigFileError` line naming the file (or the option),
  the key and the fix, exit 2.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, TypeVar

from specops.errors import ConfigFileError

T = TypeVar("T")

MAX_BYTES = 8 << 20
"""Default size limit (8 MiB): config.json, run.json and export files are far smaller."""

TOKENIZER_MAX_BYTES = 64 << 20
"""tokenizer.json of a 256k vocabulary is ~30 MiB."""

MAX_DEPTH = 64
"""Deepest nesting of objects and lists accepted (HF configs nest 3-4 levels)."""

_MISSING = object()


def _refuse_constant(name: str) -> float:
    raise ValueError(f"non-finite number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is too large (not a finite 64-bit float)")
    return value


def _depth_ok(data: Any, limit: int) -> bool:
    """True when no object or list nests deeper than ``limit`` (iterative: no recursion limit)."""
    stack = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            values = item.values()
        elif isinstance(item, list):
            values = item
        else:
            continue
        if depth > limit:
            return False
        stack.extend((v, depth + 1) for v in values if isinstance(v, (dict, list)))
    return True


def parse_json_text(text: str | bytes, source: str, *, fix: str = "fix the JSON", max_bytes: int = MAX_BYTES,
                    max_depth: int = MAX_DEPTH, line: int | None = None) -> Any:
    """Parse JSON text strictly (see the module docstring); ``source`` names it in errors (a path, or
    an option such as ``--params``, which gets no line number)."""
    if source.startswith("-"):
        return _parse(text, source, fix, max_bytes, max_depth, None, lines=False)
    return _parse(text, source, fix, max_bytes, max_depth, line, lines=True)


def _parse(text: str | bytes, source: str, fix: str, max_bytes: int, max_depth: int, line: int | None, *,
           lines: bool) -> Any:
    if len(text) > max_bytes:
        raise ConfigFileError(f"{len(text) / 2**20:.1f} MiB of JSON, more than specops reads "
                              f"({max_bytes / 2**20:.0f} MiB)", fix, path=source, line=line)
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ConfigFileError("not UTF-8 text", fix, path=source, line=line) from None
    try:
        data = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise ConfigFileError(f"nested too deeply (more than {max_depth} levels)", fix, path=source,
                              line=line) from None
    except json.JSONDecodeError as exc:
        raise ConfigFileError(f"not valid JSON ({exc.msg}, column {exc.colno})", fix, path=source,
                              line=line or (exc.lineno if lines else None)) from None
    except ValueError as exc:  # a non-finite number, an integer of more than 4,300 digits
        msg = str(exc).split(":")[0] if "digits" in str(exc) else str(exc)
        raise ConfigFileError(msg[:160], fix + "; write finite numbers of ordinary size", path=source,
                              line=line) from None
    if not _depth_ok(data, max_depth):
        raise ConfigFileError(f"nested too deeply (more than {max_depth} levels)", fix, path=source, line=line)
    return data


def load_json(path: str | Path, *, fix: str = "fix the JSON file", max_bytes: int = MAX_BYTES,
              max_depth: int = MAX_DEPTH) -> Any:
    """Read and parse one JSON file strictly; a missing, oversized or unreadable file is one line."""
    p = Path(path)
    try:
        found = p.is_file()
        size = p.stat().st_size if found else 0
    except (OSError, ValueError) as exc:
        raise ConfigFileError(f"cannot use the path: {getattr(exc, 'strerror', None) or exc}", "check the path",
                              path=str(p)[:300]) from None
    if not found:
        raise ConfigFileError("no such file (or not a regular file)", "check the path", path=str(p)[:300])
    if size > max_bytes:
        raise ConfigFileError(f"the file is {size / 2**20:.1f} MiB, more than specops reads "
                              f"({max_bytes / 2**20:.0f} MiB)", fix, path=str(p))
    try:
        with open(p, "rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise ConfigFileError(f"cannot read the file ({exc.strerror or exc.__class__.__name__})",
                              "check its permissions", path=str(p)) from None
    return parse_json_text(raw, str(p), fix=fix, max_bytes=max_bytes, max_depth=max_depth)


def load_json_object(path: str | Path, *, fix: str = "fix the JSON file", max_bytes: int = MAX_BYTES) -> JsonObject:
    """:func:`load_json` for a file that must hold one JSON object; returns it as a :class:`JsonObject`."""
    data = load_json(path, fix=fix, max_bytes=max_bytes)
    return JsonObject.of(data, str(path), fix=fix)


class JsonObject:
    """A JSON object read key by key as the type and range its reader needs; a wrong value is one
    :class:`ConfigFileError` naming the source, the key and the fix."""

    __slots__ = ("data", "source", "fix", "prefix")

    def __init__(self, data: dict, source: str, *, fix: str = "fix the JSON file", prefix: str = "") -> None:
        self.data = data
        self.source = source
        self.fix = fix
        self.prefix = prefix

    @classmethod
    def of(cls, data: Any, source: str, *, fix: str = "fix the JSON file", what: str = "a JSON object") -> JsonObject:
        if not isinstance(data, dict):
            raise ConfigFileError(f"the top level is {_kind(data)}, not {what}", fix, path=source)
        return cls(data, source, fix=fix)

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def _err(self, key: str, msg: str) -> ConfigFileError:
        return ConfigFileError(f'"{self.prefix}{key}" {msg}', self.fix, path=self.source)

    def raw(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def int(self, key: str, lo: int, hi: int, default: Any = _MISSING) -> Any:
        """An integer in [lo, hi] (a whole float such as 4096.0 counts; a bool does not); a missing or
        null key gives ``default`` (an error when there is none)."""
        value = self.data.get(key)
        if value is None:
            if default is _MISSING:
                raise self._err(key, "is missing")
            return default
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._err(key, f"is {_shown(value)}, not an integer")
        if not lo <= value <= hi:
            raise self._err(key, f"is {_shown(value)}, outside {lo}..{hi}")
        return value

    def number(self, key: str, lo: float, hi: float, default: Any = _MISSING) -> Any:
        """A finite number in [lo, hi]."""
        value = self.data.get(key)
        if value is None:
            if default is _MISSING:
                raise self._err(key, "is missing")
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._err(key, f"is {_shown(value)}, not a number")
        if not (math.isfinite(value) and lo <= value <= hi):
            raise self._err(key, f"is {_shown(value)}, outside {lo:g}..{hi:g}")
        return value

    def str(self, key: str, default: Any = _MISSING, *, max_len: int = 1000) -> Any:
        value = self.data.get(key)
        if value is None:
            if default is _MISSING:
                raise self._err(key, "is missing")
            return default
        if not isinstance(value, str):
            raise self._err(key, f"is {_shown(value)}, not a string")
        if len(value) > max_len:
            raise self._err(key, f"is a string of {len(value)} characters (at most {max_len})")
        return value

    def bool(self, key: str, default: Any = _MISSING) -> Any:
        value = self.data.get(key)
        if value is None:
            if default is _MISSING:
                raise self._err(key, "is missing")
            return default
        if not isinstance(value, bool):
            raise self._err(key, f"is {_shown(value)}, not true or false")
        return value

    def obj(self, key: str) -> JsonObject | None:
        """A nested object (None when the key is missing or null)."""
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self._err(key, f"is {_shown(value)}, not an object")
        return JsonObject(value, self.source, fix=self.fix, prefix=f"{self.prefix}{key}.")

    def list(self, key: str) -> list | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self._err(key, f"is {_shown(value)}, not a list")
        return value


def validate_json(data: Any, model: type[T], source: str, *, fix: str | None = None, line: int | None = None) -> T:
    """Validate parsed JSON as the pydantic ``model``; the first error is one line naming the key."""
    from pydantic import ValidationError

    try:
        return model.model_validate(data)  # type: ignore[attr-defined]
    except ValidationError as exc:
        errors = exc.errors()
        err = next((e for e in errors if e.get("type") == "extra_forbidden"), errors[0])
        where = ".".join(str(p) for p in err.get("loc", ())) or "(top level)"
        msg = str(err.get("msg", "invalid value"))
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        own_fix = None
        if " To fix: " in msg:
            msg, own_fix = msg.split(" To fix: ", 1)
        if err.get("type") == "extra_forbidden":
            msg = "is not a known key"
        raise ConfigFileError(f'"{where}": {msg}', own_fix or fix or "correct the value", path=source,
                              line=line) from None


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _shown(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return _kind(value)
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."
