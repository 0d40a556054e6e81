"""Secrets in argv, caught in every spelling.

vLLM's argument parser treats ``_`` and ``-`` in an option name alike (``--api_key`` is ``--api-key``)
and takes a value as ``--opt=value`` or ``--opt value``. A secret check that compares spelled flags
misses those, so every check here works on the *normalised* option name: leading dashes dropped,
lowercased, ``_`` turned into ``-``, anything after ``=`` cut.

- :func:`secret_options`: the secret options an argv names (for refusing a spec or launch config);
- :func:`redact_argv`: the argv with every secret value replaced by ``<redacted>`` (for whatever is
  printed, stored or rendered, as a second line of defence).
"""

from __future__ import annotations

REDACTED = "<redacted>"

SECRET_OPTIONS = frozenset({"api-key", "hf-token", "token", "password", "secret", "access-token",
                            "auth-token", "hf-api-key", "openai-api-key"})
"""Normalised option names whose value is a secret (vLLM: --api-key, --hf-token)."""

_SECRET_SUFFIXES = ("-api-key", "-token", "-password", "-secret", "-access-key", "-secret-key")


def option_name(arg: str) -> str | None:
    """The normalised name of an option argument (``--Api_Key=x`` -> ``api-key``); None for a value."""
    if not arg.startswith("-") or arg in ("-", "--") or _is_number(arg):
        return None
    return arg.lstrip("-").split("=", 1)[0].strip().lower().replace("_", "-")


def is_secret_option(arg: str) -> bool:
    name = option_name(arg)
    if not name:
        return False
    return name in SECRET_OPTIONS or name.endswith(_SECRET_SUFFIXES)


def secret_options(argv: list[str]) -> list[str]:
    """The secret options in ``argv`` as spelled there, without their values."""
    return [a.split("=", 1)[0] for a in argv if is_secret_option(a)]


def redact_argv(argv: list[str]) -> list[str]:
    """``argv`` with the value of every secret option replaced (both ``--opt=v`` and ``--opt v``)."""
    out: list[str] = []
    hide_next = False
    for a in argv:
        if hide_next:
            hide_next = False
            if option_name(a) is None:
                out.append(REDACTED)
                continue
        if is_secret_option(a):
            if "=" in a:
                out.append(a.split("=", 1)[0] + "=" + REDACTED)
            else:
                out.append(a)
                hide_next = True
            continue
        out.append(a)
    return out


def _is_number(arg: str) -> bool:
    try:
        float(arg)
    except ValueError:
        return False
    return True
