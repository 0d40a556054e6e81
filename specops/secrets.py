"""Secrets in argv and in URLs, caught in every spelling.

**argv, parsed the way vLLM parses it.** vLLM's ``FlexibleArgumentParser``
(vllm/utils/argparse_utils.py) is a stdlib ``argparse.ArgumentParser`` that does not turn off
``allow_abbrev``, so an unambiguous prefix of an option is that option (``--api-ke sk-1`` sets
``--api-key``); before parsing it turns ``_`` into ``-`` in every ``--name`` (``--api_key`` is
``--api-key``), and argparse takes a value as ``--opt=value`` or ``--opt value``. A check that compares
spelled flags misses all of those, so every check here works on the *normalised* option name:
leading dashes dropped (Unicode dashes counted as dashes), surrounding white space dropped,
lowercased, ``_`` turned into ``-``, anything after ``=``, a space or a ``.`` cut. An element that
carries its own value (``"--api-key sk-1"`` as one string, ``api_key=sk-1`` without dashes) counts
too: it is echoed wherever argv is shown, even if vLLM would refuse it.

- :func:`secret_options`: the secret options an argv names, without their values (for refusing a
  spec or launch config);
- :func:`redact_argv`: the argv with every secret value replaced by ``<redacted>`` (for whatever is
  printed, stored or rendered, as a second line of defence).

**URLs.** :func:`redact_url` hides ``user:password@`` and the value of every query parameter that
carries a credential (``?access_token=``, ``token=``, ``apikey=``, ``X-Amz-Signature=``...);
:func:`url_credentials` names what a URL carries, for refusing it.
"""

from __future__ import annotations

import re

REDACTED = "<redacted>"

VLLM_SECRET_OPTIONS = ("api-key", "hf-token")
"""vLLM's options whose value is a secret (``vllm serve --help``); their prefixes count (argparse
abbreviations)."""

SECRET_OPTIONS = frozenset({*VLLM_SECRET_OPTIONS, "token", "password", "secret", "access-token", "auth-token",
                            "hf-api-key", "openai-api-key", "apikey", "api-token", "passwd"})
"""Normalised option names whose value is a secret (vLLM's own and the usual spellings of others)."""

_SECRET_SUFFIXES = ("-api-key", "-token", "-password", "-secret", "-access-key", "-secret-key", "-apikey")

MIN_PREFIX = 2
"""Shortest abbreviation counted (``--hf``); a one-letter ``--a`` is ambiguous in vLLM's parser."""

DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"
"""Unicode characters that look like a hyphen (a pasted ``—api-key``)."""

_INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff"
_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")


def _parts(arg: str) -> tuple[str, str | None, str | None] | None:
    """(normalised name, the spelled option as given, separator + value) of an option argument;
    None for a plain value."""
    text = str(arg).strip().strip(_INVISIBLE).strip()
    lead = len(text) - len(text.lstrip("-" + DASHES))
    if lead == 0 and "=" not in text:
        return None
    body = text[lead:]
    if lead and (not body or _is_number(text.translate({ord(c): "-" for c in DASHES}))):
        return None
    m = re.match(r"([^=\s.]*)([=\s.].*)?\Z", body, re.S)
    if not m:
        return None
    name = m.group(1).strip().lower().replace("_", "-")
    if not _NAME.fullmatch(name or "-"):
        return None
    rest = m.group(2)
    if not lead and not (rest or "").startswith("="):
        return None  # "hello world" is a value, "api_key=..." is an option spelled without dashes
    spelled = str(arg)[: len(str(arg)) - len(rest)] if rest else str(arg)
    return name, spelled, rest


def option_name(arg: str) -> str | None:
    """The normalised name of an option argument (``--Api_Key=x`` -> ``api-key``); None for a value."""
    parts = _parts(arg)
    return parts[0] if parts else None


def _secret_name(name: str, dashed: bool) -> bool:
    if name in SECRET_OPTIONS or name.endswith(_SECRET_SUFFIXES):
        return True
    return dashed and len(name) >= MIN_PREFIX and any(s.startswith(name) for s in VLLM_SECRET_OPTIONS)


def is_secret_option(arg: str) -> bool:
    parts = _parts(arg)
    if not parts:
        return False
    return _secret_name(parts[0], dashed=_dashed_option(arg))


def secret_options(argv: list[str]) -> list[str]:
    """The secret options in ``argv`` as spelled there, never with their values."""
    out = []
    for a in argv:
        if is_secret_option(a):
            parts = _parts(a)
            out.append(parts[1].strip() if parts else "?")
    return out


def redact_argv(argv: list[str]) -> list[str]:
    """``argv`` with the value of every secret option replaced (``--opt=v``, ``--opt v``, ``"--opt v"``)."""
    out: list[str] = []
    hide_next = False
    for a in argv:
        if hide_next:
            hide_next = False
            if not _dashed_option(a):  # argparse takes the next element as the value unless it is an option
                out.append(REDACTED)
                continue
        if is_secret_option(a):
            parts = _parts(a)
            rest = (parts[2] if parts else None) or ""
            if rest.startswith("."):  # --api-key.x=v or --api-key.x v (vLLM's dotted dict options)
                at = rest.find("=")
                rest, keep = (rest[at:], parts[1] + rest[:at]) if at >= 0 else ("", a)
            else:
                keep = parts[1] if parts else a
            if rest.strip(" \t="):
                out.append(keep + rest[0] + REDACTED)
            else:
                out.append(a)
                hide_next = True
            continue
        out.append(a)
    return out


def _dashed_option(arg: str) -> bool:
    text = str(arg).strip().strip(_INVISIBLE).strip()
    return text[:1] != "" and text[:1] in "-" + DASHES and _parts(arg) is not None


def _is_number(arg: str) -> bool:
    try:
        float(arg)
    except ValueError:
        return False
    return True


# --- URLs ----------------------------------------------------------------------------------------

SECRET_QUERY_KEYS = frozenset({"access-token", "token", "apikey", "api-key", "key", "password", "passwd", "pwd",
                               "secret", "auth", "authorization", "sig", "signature", "x-amz-signature",
                               "x-amz-credential", "x-amz-security-token", "client-secret", "code", "id-token",
                               "refresh-token", "session", "sessionid", "jwt", "bearer"})
"""Normalised query parameter names whose value is a credential."""


def _secret_query_key(key: str) -> bool:
    k = key.strip().lower().replace("_", "-")
    return k in SECRET_QUERY_KEYS or k.endswith(_SECRET_SUFFIXES) or k.endswith(("-key", "-sig"))


def url_credentials(url: str) -> list[str]:
    """What secret a URL carries: ``"user:password@"`` and/or the names of credential query parameters."""
    from urllib.parse import parse_qsl, urlsplit

    try:
        parts = urlsplit(str(url))
    except ValueError:
        return []
    found = ["user:password@"] if (parts.username or parts.password or "@" in parts.netloc) else []
    for query in (parts.query, parts.fragment):
        found += [f"{k}=" for k, _ in parse_qsl(query, keep_blank_values=True) if _secret_query_key(k)]
    return found


def redact_url(url: str) -> str:
    """``url`` with ``user:password@`` replaced by ``***@`` and every credential query value by
    ``<redacted>`` (for messages, reports and rows; nothing else changes)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(str(url))
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc
    if parts.username or parts.password or "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[-1]
    query, fragment = _redact_query(parts.query), _redact_query(parts.fragment)
    if (netloc, query, fragment) == (parts.netloc, parts.query, parts.fragment):
        return str(url)
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def _redact_query(query: str) -> str:
    if not query or "=" not in query:
        return query
    out = []
    for pair in query.split("&"):
        key, sep, _value = pair.partition("=")
        from urllib.parse import unquote_plus

        out.append(f"{key}={REDACTED}" if sep and _secret_query_key(unquote_plus(key)) else pair)
    return "&".join(out)


_URL_IN_TEXT = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>]+")


def redact_text(text: str) -> str:
    """Every URL inside ``text`` (a message, a finding) passed through :func:`redact_url`."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)


# --- structured data: rows, exports, imports -------------------------------------------------------

_KEY_SUFFIXES = ("-api-key", "-token", "-password", "-apikey")


def _secret_key(key: str) -> bool:
    k = str(key).strip().lower().replace("_", "-")
    return k in SECRET_OPTIONS or k.endswith(_KEY_SUFFIXES)


def _argv_like(items: list) -> bool:
    return bool(items) and all(isinstance(x, str) for x in items) and any(_dashed_option(x) for x in items)


def find_secrets(data, where: str = "") -> list[str]:
    """Where ``data`` (parsed JSON) carries a secret: a URL with credentials, an argv with a secret
    option whose value is not redacted, a secret-named key with a value. Paths only, never values."""
    found: list[str] = []
    stack = [(data, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                sub = f"{path}.{k}" if path else str(k)
                if _secret_key(k) and isinstance(v, str) and v and v != REDACTED:
                    found.append(sub)
                else:
                    stack.append((v, sub))
        elif isinstance(item, list):
            if _argv_like(item) and redact_argv(item) != item:
                found.append(path)
                continue
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item))
        elif isinstance(item, str) and "://" in item:
            if any(url_credentials(m.group(0)) for m in _URL_IN_TEXT.finditer(item)):
                found.append(path)
    return sorted(found)


def redact_data(data):
    """A copy of ``data`` with every secret :func:`find_secrets` looks for replaced by ``<redacted>``."""
    if isinstance(data, dict):
        return {k: (REDACTED if _secret_key(k) and isinstance(v, str) and v else redact_data(v))
                for k, v in data.items()}
    if isinstance(data, list):
        if _argv_like(data):
            return redact_argv(data)
        return [redact_data(v) for v in data]
    if isinstance(data, str):
        return redact_text(data)
    return data
