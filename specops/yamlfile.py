"""Strict YAML loading for specs, playbooks and catalogs.

- Safe loader only; anchors and aliases are refused (no alias bombs, no hidden sharing).
- Bounded: a file larger than :data:`MAX_BYTES` is refused before it is read, nesting deeper than
  :data:`MAX_DEPTH` is refused while parsing (never a RecursionError).
- A key given twice in one mapping is refused (YAML would silently keep the last one), and so is a
  non-finite number (``.inf``, ``.nan``): no specops file has a use for either.
- Errors name the file and line (exit 2).
- :func:`load_model` validates with a pydantic model and turns the first validation error into
  one line with file, line, what is wrong, "did you mean" for unknown keys, and ``To fix:``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml

from specops.errors import ConfigFileError, did_you_mean

T = TypeVar("T")

MAX_BYTES = 8 << 20
"""Largest YAML file specops reads (8 MiB; the shipped playbooks are under 20 KiB)."""

MAX_DEPTH = 64
"""Deepest nesting of mappings and lists accepted in a YAML file."""


def check_size(path: str | Path, limit: int = MAX_BYTES) -> None:
    """Refuse a file larger than ``limit`` bytes before reading it (a 100 MB input answers at once)."""
    try:
        size = Path(path).stat().st_size
    except OSError:
        return  # reading it will report the problem
    if size > limit:
        raise ConfigFileError(f"the file is {size / 2**20:.1f} MiB, more than specops reads "
                              f"({limit / 2**20:.0f} MiB)", "give the intended file; specs and playbooks are small",
                              path=str(path))


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors, aliases, duplicate keys, non-finite numbers and deep nesting."""

    _depth = 0

    def compose_node(self, parent, index):  # type: ignore[override]
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                event = self.peek_event()
                raise ConfigFileError(f"nested more than {MAX_DEPTH} levels deep",
                                      "flatten the structure; no specops file nests that deep",
                                      line=event.start_mark.line + 1)
            node = self._compose_node(parent, index)
        finally:
            self._depth -= 1
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode):
                    if key.value in seen:
                        raise ConfigFileError(f'key "{key.value}" is given twice (first at line {seen[key.value]})',
                                              "keep one of them; YAML would silently use the last",
                                              line=key.start_mark.line + 1)
                    seen[key.value] = key.start_mark.line + 1
        return node

    def construct_yaml_float(self, node):  # type: ignore[override]
        value = super().construct_yaml_float(node)
        if value != value or value in (float("inf"), float("-inf")):
            raise ConfigFileError(f'non-finite number "{node.value}"', "write a finite number",
                                  line=node.start_mark.line + 1)
        return value

    def construct_yaml_int(self, node):  # type: ignore[override]
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # more than 4,300 digits (Python's int conversion limit)
            raise ConfigFileError(f"integer of {len(node.value)} digits is too long", "write a smaller number",
                                  line=node.start_mark.line + 1) from None

    def _compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise ConfigFileError(
                "YAML aliases are not allowed",
                "write the value out in full instead of using *alias references",
                line=event.start_mark.line + 1,
            )
        event = self.peek_event()
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            raise ConfigFileError(
                f'YAML anchors are not allowed (found "&{anchor}")',
                "remove the &anchor and write values out in full",
                line=event.start_mark.line + 1,
            )
        return super().compose_node(parent, index)


_StrictLoader.add_constructor("tag:yaml.org,2002:float", _StrictLoader.construct_yaml_float)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)


def _line_map(node: yaml.Node, path: tuple = (), out: dict | None = None) -> dict[tuple, int]:
    out = {} if out is None else out
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            k = key.value
            out[path + (k,)] = key.start_mark.line + 1
            _line_map(value, path + (k,), out)
            out[path + (k,)] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _line_map(item, path + (i,), out)
    return out


def parse_yaml_text(text: str, source: str = "<string>") -> tuple[Any, dict[tuple, int]]:
    """Parse YAML text; return (data, {key path: line})."""
    if len(text) > MAX_BYTES:
        raise ConfigFileError(f"the text is {len(text) / 2**20:.1f} MiB, more than specops reads "
                              f"({MAX_BYTES / 2**20:.0f} MiB)", "give the intended file", path=source)
    try:
        loader = _StrictLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None, {}
            data = loader.construct_document(node)
        finally:
            loader.dispose()
        return data, _line_map(node)
    except ConfigFileError as exc:
        raise ConfigFileError(exc.message.split(": ", 1)[-1] if exc.path else exc.message, exc.fix,
                              path=source, line=exc.line) from None
    except RecursionError:  # a last line of defence; MAX_DEPTH stops nesting first
        raise ConfigFileError("nested too deeply", "flatten the structure", path=source) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigFileError(f"invalid YAML: {problem}", "fix the YAML syntax at that line",
                              path=source, line=line) from None


def load_yaml(path: str | Path) -> Any:
    """Load one YAML file strictly (no aliases); errors name file and line."""
    data, _ = _read(path)
    return data


def _read(path: str | Path) -> tuple[Any, dict[tuple, int]]:
    p = Path(path)
    try:
        found = p.is_file()
    except (OSError, ValueError) as exc:  # a name too long for the file system, a NUL byte
        shown = str(p)[:120].encode("unicode_escape").decode()
        raise ConfigFileError(f"cannot use the path {shown}...: {getattr(exc, 'strerror', None) or exc}",
                              "check the path", path=None) from None
    if not found:
        raise ConfigFileError(f"file not found: {str(p)[:300]}", "check the path", path=None)
    check_size(p)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigFileError(f"cannot read file: {exc.__class__.__name__}", "check permissions and encoding",
                              path=str(p)) from None
    return parse_yaml_text(text, str(p))


def validation_error_to_config_error(exc: Exception, model: type, lines: dict[tuple, int],
                                     source: str) -> ConfigFileError:
    """Turn a pydantic ValidationError into one ConfigFileError line (first error)."""
    errors = exc.errors()  # type: ignore[attr-defined]
    # an unknown key explains a "Field required" next to it (a misspelled key): report it first
    err = next((e for e in errors if e.get("type") == "extra_forbidden"), errors[0])
    loc = tuple(err.get("loc", ()))
    # pydantic puts model-validator errors at loc () and tagged unions add tag names; trim to real keys
    line = None
    probe = loc
    while probe:
        if probe in lines:
            line = lines[probe]
            break
        probe = probe[:-1]
    if line is None:
        line = lines.get((), None)
    where = ".".join(str(p) for p in loc) or "(top level)"
    etype = err.get("type", "")
    msg = err.get("msg", "invalid value")
    if etype == "extra_forbidden":
        key = str(loc[-1]) if loc else "?"
        parent = _model_at(model, loc[:-1])
        allowed = sorted(parent.model_fields) if parent is not None else []
        hint = did_you_mean(key, allowed)
        return ConfigFileError(f'unknown key "{where}".{hint}',
                               "remove it or use one of: " + ", ".join(allowed), path=source, line=line)
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    fix = "correct the value"
    if " To fix: " in msg:
        msg, fix = msg.split(" To fix: ", 1)
    return ConfigFileError(f"{where}: {msg}", fix, path=source, line=line)


def _model_at(model: Any, loc: tuple) -> Any:
    """Follow field names through nested pydantic models; None when lost."""
    current = model
    for part in loc:
        if isinstance(part, int):
            continue
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return None
        ann = fields[part].annotation
        current = _unwrap(ann)
        if current is None:
            return None
    return current if hasattr(current, "model_fields") else None


def _unwrap(ann: Any) -> Any:
    import typing

    if hasattr(ann, "model_fields"):
        return ann
    for arg in typing.get_args(ann):
        found = _unwrap(arg)
        if found is not None:
            return found
    return None


def load_model(path: str | Path, model: type[T]) -> T:
    """Load a YAML file and validate it as ``model``; one clear line on any problem."""
    data, lines = _read(path)
    return validate_data(data, lines, model, str(path))


def validate_data(data: Any, lines: dict[tuple, int], model: type[T], source: str) -> T:
    from pydantic import ValidationError

    if data is None:
        raise ConfigFileError("the file is empty", f"write a {model.__name__} mapping", path=source, line=1)
    try:
        return model.model_validate(data)  # type: ignore[attr-defined]
    except ValidationError as exc:
        raise validation_error_to_config_error(exc, model, lines, source) from None
