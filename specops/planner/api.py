"""Request building for callers that start from loose values (the CLI): settings precedence,
choices with "did you mean", and pydantic errors turned into one-line InputErrors."""

from __future__ import annotations

import math
from typing import Any

from specops.errors import InputError, unknown
from specops.planner.types import METHODS, QUANTIZATIONS, TASKS, Plan, RecommendRequest

CHOICES = {"task": TASKS, "method": METHODS, "quantization": QUANTIZATIONS, "objective": ("latency", "throughput")}


def build_request(**values: Any) -> RecommendRequest:
    """A validated RecommendRequest; gpu and vllm_version fall back to SPECOPS_* / config.yaml."""
    from pydantic import ValidationError

    from specops.engines.capabilities import DEFAULT_VLLM_VERSION
    from specops.settings import setting

    values = {k: v for k, v in values.items() if v is not None}
    values["gpu"] = setting("gpu", values.get("gpu"))
    values["vllm_version"] = str(setting("vllm_version", values.get("vllm_version"), DEFAULT_VLLM_VERSION))
    if not values.get("gpu"):
        raise InputError("no GPU given", "pass --gpu (e.g. --gpu H100) or set SPECOPS_GPU / `gpu:` in config.yaml")
    for key, choices in CHOICES.items():
        if key in values:
            values[key] = str(values[key]).strip().lower()
            if values[key] not in choices:
                raise unknown(key.replace("_", " "), values[key], choices, fix=f"use --{key} " + "|".join(choices))
    for key, value in values.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"--{key.replace('_', '-')} must be a finite number, got {value}", "give a number")
    try:
        return RecommendRequest(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err.get("loc") else "input"
        flag = "--" + key.replace("_", "-")
        msg = err.get("msg", "invalid value").removeprefix("Value error, ")
        got = values.get(key)
        raise InputError(f"{flag} {got}: {msg}", f"give {flag} a valid value (see `specops recommend --help`)") from None


def recommend_with_defaults(request: RecommendRequest) -> Plan:
    from specops.planner.recommend import recommend

    return recommend(request)
