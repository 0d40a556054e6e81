"""Fakes for tune unit tests (no engine can be started per unit test; the real-engine test is
test_engine_tune.py): a deployer that "starts" instantly (or fails for a chosen draft), and a
measurer that generates internally consistent engine counters and timings from known coefficients."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from specops.errors import EngineError
from specops.tune.types import EngineConfig, Sample

TRUE = {"overhead_ms": 20.0, "per_seq_ms": 3.0, "per_token_ms": 1.5, "spec_step": {"ngram": 2.0, "draft_model": 1.0},
        "draft_tok": {"draft_model": 4.0}, "draft_tok_seq": {"draft_model": 0.5}, "draft_seq": {"ngram": 0.3}}
CUM = {"ngram": [0.6, 0.45, 0.35, 0.28, 0.22, 0.18], "draft_model": [0.7, 0.49, 0.343, 0.24, 0.168, 0.1176]}
FRACTION = {"ngram": 0.8, "draft_model": 1.0}
UTIL = {1: 0.9, 4: 0.8}


def true_step_ms(config: EngineConfig, b: int) -> float:
    m, g = config.method, config.gamma
    f = FRACTION.get(m, 0.0)
    step = TRUE["overhead_ms"] + TRUE["per_seq_ms"] * b + TRUE["per_token_ms"] * b * (1 + f * g)
    step += TRUE["spec_step"].get(m, 0.0)
    if m == "ngram":
        step += f * b * TRUE["draft_seq"]["ngram"]
    elif m == "draft_model":
        step += f * g * (TRUE["draft_tok"][m] + TRUE["draft_tok_seq"][m] * b)
    return step


def true_tau(config: EngineConfig) -> float:
    if config.method == "none":
        return 1.0
    return 1.0 + FRACTION[config.method] * sum(CUM[config.method][:config.gamma])


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
        per_pos = [drafts * c for c in CUM[config.method][:config.gamma]]
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
