"""Scripted fake verifiers for the calibration tests (the real one is SmolLM2, exercised by the benchmark)."""

from __future__ import annotations

import math
import random
import re

from rlce_trl.calibration.cases import CalibrationCase
from rlce_trl.verifiers.base import Reply, Request, Verifier

_CASE = re.compile(r"case (\S+) truth (yes|no|unknown) dist (\w+)")


def synthetic_cases(dist: str, n: int, split: str = "calibration") -> list[CalibrationCase]:
    """Balanced yes/no cases whose context names its truth and distribution (only the fake verifier reads it)."""
    return [
        CalibrationCase(f"{dist}{i}", f"case {dist}{i} truth {'yes' if i % 2 else 'no'} dist {dist}", f"claim {i}",
                        "yes" if i % 2 else "no", split, source=dist)
        for i in range(n)
    ]


class PromptSensitiveSyntheticVerifier(Verifier):
    """A fake validator whose error rate depends on the prompt version and the case distribution.

    `errors[(marker, dist)]` is the error rate when the validation instruction contains `marker` (the first marker
    found wins; "" matches any prompt). Wrong cases are a fixed, seeded subset of each distribution, so two prompts
    with the same rate on a distribution make the same errors there. Counts calls, so tests can assert batching."""

    name = "synthetic"

    def __init__(self, errors: dict[tuple[str, str], float], seed: int = 0):
        super().__init__()
        self.errors, self.seed = errors, seed

    def _wrong(self, case_id: str, dist: str, rate: float) -> bool:
        # a fixed per-case draw: the same cases are wrong at the same rate, and more cases at a higher rate
        return random.Random(f"{self.seed}:{case_id}").random() < rate

    def _generate(self, requests: list[Request]) -> list[Reply]:
        replies = []
        for request in requests:
            text = request.messages[-1]["content"]
            match = _CASE.search(text)
            if match is None:
                replies.append(Reply(["unknown"], ["stop"], 1))
                continue
            case_id, truth, dist = match.groups()
            rate = next((r for (marker, d), r in self.errors.items() if d == dist and marker in text), 0.0)
            verdict = {"yes": "no", "no": "yes"}.get(truth, truth) if self._wrong(case_id, dist, rate) else truth
            replies.append(Reply([verdict], ["stop"], 1))
        return replies


class LogprobVerifier(Verifier):
    """A fake backend that returns fixed choice log-probabilities per claim text (`table[claim]`), and the argmax text."""

    name = "logprob-fake"

    def __init__(self, table: dict[str, dict[str, float]], default: dict[str, float]):
        super().__init__()
        self.table, self.default = table, default

    def _generate(self, requests: list[Request]) -> list[Reply]:
        replies = []
        for request in requests:
            claim = re.search(r"Claim: (.*)", request.messages[-1]["content"])
            logprobs = self.table.get(claim.group(1) if claim else "", self.default)
            best = max(logprobs, key=logprobs.get)
            replies.append(Reply([best], ["stop"], 1, choice_logprobs=dict(logprobs)))
        return replies


def lp(yes: float, no: float, unknown: float) -> dict[str, float]:
    return {"yes": math.log(yes), "no": math.log(no), "unknown": math.log(unknown)}
