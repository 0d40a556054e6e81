"""Fakes for tune unit tests (no engine can be started per unit test; the real-engine tests are
test_engine_tune.py and test_engine_fit.py): a deployer that "starts" instantly (or fails for a chosen
draft), and a measurer that generates internally consistent engine counters and timings from a ground
truth.

The ground truth is a small machine model written from how a decode step spends its time, *not* from
the fitter's formula (specops/tune/fit.py fits a step time linear in the batch, the verified tokens and
the draft work). Here every forward pass is roofline-shaped: a launch cost plus the larger of reading
the weights and computing over the tokens in the pass (``forward_ms``), so a pass is flat in the tokens
while memory-bound and linear once compute-bound; the target crosses over at ``TARGET["weights_ms"] /
TARGET["flop_ms_per_token"]`` = 10 tokens, inside the grids the tests use (1-4 sequences × 1 + γ
verified tokens). A draft model runs γ such passes per drafting step (each over the drafting
sequences), n-gram a prompt lookup per sequence that grows with the context, and every speculative
step pays the rejection sampler per verified token. No setting of the fitter's non-negative linear
coefficients reproduces the kink, so a fit is only ever approximately right, and the tests compare it
with the truth and with a naive predictor instead of expecting coefficients back. Seeded
multiplicative noise on top (``noise``) stands in for run-to-run jitter.

Acceptance is given per drafter (``CUM``: P(first k drafts accepted)), and n-gram drafts on a share
of the steps only (``FRACTION``): the counters are their expected values, so a fit's acceptance is
exact and its step time is what is tested."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from specops.errors import EngineError
from specops.tune.types import EngineConfig, Sample

# ms: the tiny 5.8M-parameter target and 0.9M draft on two CPU cores, roughly (the shapes matter, not the values)
TARGET = {"launch_ms": 14.0, "weights_ms": 9.0, "flop_ms_per_token": 0.9}
DRAFT = {"launch_ms": 3.0, "weights_ms": 1.6, "flop_ms_per_token": 0.25}
SCHEDULER_MS_PER_SEQ = 2.5  # python-side scheduling, sampling, detokenising per running sequence
REJECTION_MS_PER_TOKEN = 0.3  # the rejection sampler, per verified token
NGRAM_MS_PER_CONTEXT_TOKEN = 0.004  # the prompt lookup scans the context
CONTEXT_TOKENS = 90  # prompt + half the output, on average
CUM = {"ngram": [0.6, 0.45, 0.35, 0.28, 0.22, 0.18], "draft_model": [0.7, 0.49, 0.343, 0.24, 0.168, 0.1176]}
FRACTION = {"ngram": 0.8, "draft_model": 1.0}


def util(b: int) -> float:
    """The share of a closed-loop run's wall time spent decoding (prefill, ramp-up, tail): lower with more clients."""
    return 0.9 / (1 + 0.04 * (b - 1))


def forward_ms(model: dict, tokens: float) -> float:
    """One forward pass: launch, then memory-bound (weights read once) or compute-bound, whichever is slower."""
    return model["launch_ms"] + max(model["weights_ms"], model["flop_ms_per_token"] * tokens)


def true_step_ms(config: EngineConfig, b: int) -> float:
    """The time of one scheduler step with ``b`` running sequences."""
    drafting = FRACTION.get(config.method, 0.0) if config.method != "none" else 0.0
    verified = b * (1 + drafting * config.gamma)  # tokens through the target per step, on average
    step = forward_ms(TARGET, verified) + SCHEDULER_MS_PER_SEQ * b
    if config.method == "none":
        return step
    step += REJECTION_MS_PER_TOKEN * verified
    if config.method == "ngram":
        step += NGRAM_MS_PER_CONTEXT_TOKEN * CONTEXT_TOKENS * b
    else:  # γ sequential draft passes per drafting step, each over the drafting sequences
        step += drafting * config.gamma * forward_ms(DRAFT, drafting * b)
    return step


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
    return Sample(tpot_ms=tpot, tokens_per_s=util(b) * b * 1000 / tpot, num_drafts=drafts,
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
