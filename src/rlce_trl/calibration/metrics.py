"""Agreement between the validator's verdicts and human labels: accuracy, Cohen's kappa, yes-rate, bootstrap CIs.

Pure Python (no numpy): the sets are small (tens to a few thousand cases).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field


def accuracy(pred: Sequence[str], gold: Sequence[str]) -> float:
    return sum(p == g for p, g in zip(pred, gold, strict=True)) / len(gold) if gold else math.nan


def cohen_kappa(pred: Sequence[str], gold: Sequence[str]) -> float:
    """Cohen's kappa over the labels present; NaN when chance agreement is 1 (a single label on both sides)."""
    n = len(gold)
    if n == 0:
        return math.nan
    observed = accuracy(pred, gold)
    p_count, g_count = Counter(pred), Counter(gold)
    expected = sum(p_count[k] * g_count[k] for k in set(p_count) | set(g_count)) / (n * n)
    return math.nan if expected >= 1.0 else (observed - expected) / (1.0 - expected)


def yes_rate(pred: Sequence[str], gold: Sequence[str] | None = None) -> float:
    return sum(p == "yes" for p in pred) / len(pred) if pred else math.nan


METRICS: dict[str, Callable[[Sequence[str], Sequence[str]], float]] = {
    "accuracy": accuracy, "kappa": cohen_kappa, "yes_rate": yes_rate}


@dataclass
class Estimate:
    value: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


def bootstrap(pred: Sequence[str], gold: Sequence[str], metric: Callable, resamples: int = 1000, seed: int = 0,
              level: float = 0.95) -> Estimate:
    """The metric with a percentile bootstrap CI over cases (resampled with replacement; NaN draws are skipped)."""
    value = metric(pred, gold)
    rng = random.Random(seed)
    n = len(gold)
    draws = []
    for _ in range(resamples if n else 0):
        idx = [rng.randrange(n) for _ in range(n)]
        draw = metric([pred[i] for i in idx], [gold[i] for i in idx])
        if not math.isnan(draw):
            draws.append(draw)
    if not draws:
        return Estimate(value, math.nan, math.nan)
    draws.sort()
    tail = (1 - level) / 2
    low = draws[min(int(tail * len(draws)), len(draws) - 1)]
    high = draws[min(int((1 - tail) * len(draws)), len(draws) - 1)]
    return Estimate(value, low, high)


@dataclass
class Alignment:
    """How well one prompt version's verdicts agree with the labels of a set of cases."""

    version: str
    n: int
    accuracy: Estimate
    kappa: Estimate
    yes_rate: Estimate
    true_yes_rate: float
    verdicts: Counter = field(default_factory=Counter)  # yes / no / unknown as answered
    unreadable: int = 0  # replies that could not be read (counted as "unknown")
    predictions: list[str] = field(default_factory=list, repr=False)

    def metric(self, name: str) -> float:
        return getattr(self, name).value

    def to_dict(self) -> dict:
        return {"version": self.version, "n": self.n, "true_yes_rate": self.true_yes_rate,
                **{name: asdict(getattr(self, name)) for name in METRICS}, "verdicts": dict(self.verdicts),
                "unreadable": self.unreadable}


def alignment(version: str, pred: Sequence[str], gold: Sequence[str], unreadable: int = 0, resamples: int = 1000,
              seed: int = 0) -> Alignment:
    """All metrics of one set of verdicts, each with its bootstrap CI (the same resamples for every metric)."""
    pred, gold = list(pred), list(gold)
    estimates = {name: bootstrap(pred, gold, metric, resamples, seed) for name, metric in METRICS.items()}
    return Alignment(version, len(gold), **estimates, true_yes_rate=yes_rate(gold), verdicts=Counter(pred),
                     unreadable=unreadable, predictions=pred)
