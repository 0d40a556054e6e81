"""Fakes for tune unit tests (no engine can be started per unit test; the real-engine test is
test_engine_tune.py): a deployer that "starts" instantly (or fails for a chosen draft), and a
measurer that generates internally consistent engine counters and timings from a ground truth.

The ground truth is deliberately *not* the fitter's model (specops/tune/fit.py): besides costs the
fitter has columns for, every step pays a contention cost quadratic in the tokens verified in that
step (``CONTENTION_MS · verified²``, as a CPU does once a batch stops fitting in cache), which no
non-negative combination of the fitter's linear features reproduces. Seeded multiplicative noise on
top (``noise``) stands in for run-to-run jitter. So a fit can only ever be approximately right, and
tests bound its error instead of expecting the generating coefficients back."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from specops.errors import EngineError
from specops.tune.types import EngineConfig, Sample

TRUE = {"overhead_ms": 20.0, "per_seq_ms": 3.0, "per_token_ms": 1.5, "spec_step": {"ngram": 2.0, "draft_model": 1.0},
        "draft_tok": {"draft_model": 4.0}, "draft_tok_seq": {"draft_model": 0.5}, "draft_seq": {"ngram": 0.3}}
CONTENTION_MS = 0.01  # ms per (verified token in the step)²: the term the fitter has no column for
CUM = {"ngram": [0.6, 0.45, 0.35, 0.28, 0.22, 0.18], "draft_model": [0.7, 0.49, 0.343, 0.24, 0.168, 0.1176]}
FRACTION = {"ngram": 0.8, "draft_model": 1.0}
UTIL = {1: 0.9, 4: 0.8}


def modelled_step_ms(config: EngineConfig, b: int) -> float:
    """The part of a step's time the fitter's features can express (what the best fit could recover)."""
    drafting = FRACTION.get(config.method, 0.0)  # share of steps that carry a draft
    verified = b * (1 + drafting * config.gamma)  # tokens through the target per step, on average
    target = TRUE["overhead_ms"] + TRUE["per_seq_ms"] * b + TRUE["per_token_ms"] * verified
    if config.method == "none":
        return target
    proposer = TRUE["spec_step"][config.method]
    if config.method == "ngram":  # a prompt lookup per drafting sequence
        proposer += TRUE["draft_seq"]["ngram"] * drafting * b
    else:  # γ sequential draft forwards per drafting step, each wider with the batch
        proposer += drafting * config.gamma * (TRUE["draft_tok"]["draft_model"] + TRUE["draft_tok_seq"]["draft_model"] * b)
    return target + proposer


def unmodelled_step_ms(config: EngineConfig, b: int) -> float:
    """The contention cost no fitted coefficient stands for."""
    verified = b * (1 + FRACTION.get(config.method, 0.0) * config.gamma)
    return CONTENTION_MS * verified ** 2


def true_step_ms(config: EngineConfig, b: int) -> float:
    return modelled_step_ms(config, b) + unmodelled_step_ms(config, b)


def true_cum(config: EngineConfig) -> list[float]:
    """P(first k drafts accepted): the drafter's (CUM), or α^k on a synthetic cost run — as vLLM's
    synthetic rejection sampler would produce (which the CPU engine cannot run; see test_synthetic.py)."""
    if config.synthetic_rate is not None:
        return [config.synthetic_rate ** (k + 1) for k in range(config.gamma)]
    return CUM[config.method][:config.gamma]


def true_tau(config: EngineConfig) -> float:
    if config.method == "none":
        return 1.0
    return 1.0 + FRACTION[config.method] * sum(true_cum(config))


def synthetic_sample(config: EngineConfig, b: int, noise: float = 0.0, rng: random.Random | None = None,
                     requests: int = 8, output: int = 65) -> Sample:
    tau = true_tau(config)
    step = true_step_ms(config, b) * (1 + (rng.uniform(-noise, noise) if rng and noise else 0.0))
    tpot = step / tau
    decode_tokens = requests * (output - 1)
    steps = decode_tokens / tau
    if config.method == "none":
        drafts, per_pos = 0.0, []
    else:
        drafts = FRACTION[config.method] * steps
        per_pos = [drafts * c for c in true_cum(config)]
    return Sample(tpot_ms=tpot, tokens_per_s=UTIL[b] * b * 1000 / tpot, num_drafts=drafts,
                  num_draft_tokens=drafts * config.gamma, num_accepted_tokens=sum(per_pos),
                  accepted_per_position=per_pos, generation_tokens=requests * output, requests=requests)


@dataclass
class FakeDeployer:
    fail_draft: str | None = "/nonexistent/draft"
    started: list[str] = field(default_factory=list)
    stopped: int = 0

    def start(self, config: EngineConfig):
        if config.draft and config.draft == self.fail_draft:
            raise EngineError(f"draft folder {config.draft} does not exist", "pass an existing draft")
        self.started.append(config.key)
        return config

    def stop(self, handle) -> None:
        self.stopped += 1

    @property
    def running(self) -> int:
        """Engines started and not stopped."""
        return len(self.started) - self.stopped


@dataclass
class FakeMeasurer:
    """Returns synthetic samples; ``noise`` multiplies each step time by 1±noise (seeded)."""

    noise: float = 0.0
    seed: int = 7
    calls: list[tuple[str, int]] = field(default_factory=list)

    def __post_init__(self):
        self.rng = random.Random(self.seed)

    def __call__(self, handle: EngineConfig, concurrency: int) -> Sample:
        self.calls.append((handle.key, concurrency))
        return synthetic_sample(handle, concurrency, self.noise, self.rng)


class FakeClock:
    """Advances by `restart` per engine start and `run` per measurement when wired into the fakes."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t
