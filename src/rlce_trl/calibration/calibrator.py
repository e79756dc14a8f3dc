"""Coactive calibration of the verifier's prompts (VeriFine section 3.4, mapped onto RLCE's frozen verifier).

VeriFine revises a rubric judge in rounds: a revision is proposed, kept only if it agrees better with people on the
current batch without a substantial regression on the cases retained from earlier rounds, and revision stops after a
number of versions or when improvements stall. Here the revised object is the validation prompt (instruction text and
few-shot examples, `VerifierPrompts`); the verifier's weights never change. The acceptance rule:

    gain    = metric(candidate, current)  - metric(best, current)   > 0
    regress = metric(best, retained)      - metric(candidate, retained) <= max_regression

Stops: `max_versions` candidates scored, or a stall -- the mean gain (0 for a rejected candidate) of the last
`patience` candidates below `min_gain`. The paper's stall rule reads "average improvement in Pearson correlation
less than 0.2 for more than ten iterations"; 0.2 is the paper's figure (likely meant 0.02) and is configurable.

Proposers (`propose(best, disagreements, n) -> VerifierPrompts | None`, `None` when exhausted): [`list_proposer`]
(alternative prompts, in order) and [`few_shot_proposer`] (cases the best version gets wrong, as few-shot examples).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..evidence.prompt_set import VerifierPrompts
from ..verifiers.base import Verifier
from .agreement import ask, score_prompts
from .cases import CalibrationCase

Proposer = Callable[[VerifierPrompts, list[CalibrationCase], int], "VerifierPrompts | None"]
Scorer = Callable[[VerifierPrompts, Sequence[CalibrationCase]], tuple[float, list[str]]]


@dataclass
class Revision:
    """One scored candidate and the decision about it."""

    version: str
    proposer: str
    current: float
    retained: float | None
    gain: float
    regression: float | None
    accepted: bool
    reason: str

    def line(self) -> str:
        retained = "-" if self.retained is None else f"{self.retained:.3f}"
        verdict = "accepted" if self.accepted else "rejected"
        return (f"{self.version:<24} {self.proposer:<10} current {self.current:.3f}  retained {retained}  "
                f"{verdict} ({self.reason})")


def _finite(x: float) -> float:
    return 0.0 if x is None or math.isnan(x) else x


class CoactiveCalibrator:
    """Propose prompt revisions and keep those that agree better (module docstring).

    Args:
        verifier: the frozen verifier (its weights are never touched).
        proposers: tried in order; when one is exhausted the next takes over.
        scorer: `scorer(prompts, cases) -> (metric value, predictions)`; default: the verifier's validator agreement
            (`metric`, no bootstrap).
    """

    def __init__(self, verifier: Verifier | None, proposers: Sequence[Proposer], max_versions: int = 20,
                 patience: int = 10, min_gain: float = 0.2, max_regression: float = 0.02, metric: str = "kappa",
                 scorer: Scorer | None = None):
        problems = []
        if max_versions < 1:
            problems.append("max_versions must be >= 1")
        if patience < 1:
            problems.append("patience must be >= 1")
        if max_regression < 0:
            problems.append("max_regression must be >= 0")
        if metric not in ("accuracy", "kappa"):
            problems.append(f"metric must be accuracy or kappa, not {metric!r}")
        if scorer is None and verifier is None:
            problems.append("give a verifier or a scorer")
        if problems:
            raise ValueError("CoactiveCalibrator: " + "; ".join(problems) + ".")
        self.verifier, self.proposers = verifier, list(proposers)
        self.max_versions, self.patience, self.min_gain = max_versions, patience, min_gain
        self.max_regression, self.metric = max_regression, metric
        self.scorer = scorer
        self.stop_reason = ""

    def _both(self, prompts, current, retained):
        if self.scorer is None:  # one batched verifier call per version: current and retained cases together
            replies = ask(self.verifier, prompts, current + retained)
            cur = score_prompts(self.verifier, prompts, current, resamples=0, replies=replies[: len(current)])
            ret = score_prompts(self.verifier, prompts, retained, resamples=0, replies=replies[len(current) :])
            retained_value = _finite(ret.metric(self.metric)) if retained else None
            return _finite(cur.metric(self.metric)), retained_value, cur.predictions
        cur, predictions = self.scorer(prompts, current)
        ret = _finite(self.scorer(prompts, retained)[0]) if retained else None
        return _finite(cur), ret, predictions

    def run(self, prompts: VerifierPrompts, current: Sequence[CalibrationCase],
            retained: Sequence[CalibrationCase] = ()) -> tuple[VerifierPrompts, list[Revision]]:
        """Calibrate from `prompts` on the `current` batch, guarding `retained` cases. Returns the best prompts and
        the history (the starting version first, as an accepted entry)."""
        current, retained = list(current), list(retained)
        best = prompts
        best_cur, best_ret, predictions = self._both(best, current, retained)
        history = [Revision(best.version, "start", best_cur, best_ret, 0.0, None, True, "starting version")]
        gains: list[float] = []
        proposers = list(self.proposers)
        self.stop_reason = "max_versions"
        for n in range(1, self.max_versions + 1):
            disagreements = [c for c, p in zip(current, predictions, strict=True) if p != c.label]
            candidate = None
            while proposers and candidate is None:
                candidate = proposers[0](best, disagreements, n)
                if candidate is None:
                    proposers.pop(0)
            if candidate is None:
                self.stop_reason = "no more proposals"
                break
            name = getattr(proposers[0], "__name__", "proposer")
            if candidate.version == best.version:
                candidate = candidate.revised(version=f"{prompts.version}.r{n}")
            cur, ret, cand_predictions = self._both(candidate, current, retained)
            gain = cur - best_cur
            regression = None if ret is None or best_ret is None else best_ret - ret
            if gain <= 0:
                accepted, reason = False, f"no gain on current ({gain:+.3f})"
            elif regression is not None and regression > self.max_regression + 1e-12:
                accepted, reason = False, f"gain {gain:+.3f} but retained regresses by {regression:.3f}"
            else:
                accepted = True
                reason = f"gain {gain:+.3f}" + ("" if regression is None else f", retained {-regression:+.3f}")
            history.append(Revision(candidate.version, name, cur, ret, gain, regression, accepted, reason))
            gains.append(gain if accepted else 0.0)
            if accepted:
                best, best_cur, best_ret, predictions = candidate, cur, ret, cand_predictions
            if len(gains) >= self.patience and sum(gains[-self.patience :]) / self.patience < self.min_gain:
                self.stop_reason = "patience"
                break
        return best, history


def list_proposer(variants: Sequence[VerifierPrompts]) -> Proposer:
    """Each variant once, in order."""
    queue = list(variants)

    def variants_(best: VerifierPrompts, disagreements: list[CalibrationCase], n: int) -> VerifierPrompts | None:
        return queue.pop(0) if queue else None

    variants_.__name__ = "variants"
    return variants_


def few_shot_proposer(pool: Sequence[CalibrationCase], max_examples: int = 4) -> Proposer:
    """Add a disagreement case (with its label) as a validation example; when `max_examples` are in use, swap out the
    oldest. Each case is offered at most once."""
    offered: set[str] = set()
    allowed = {c.id for c in pool}

    def few_shot(best: VerifierPrompts, disagreements: list[CalibrationCase], n: int) -> VerifierPrompts | None:
        fresh = [c for c in disagreements if c.id in allowed and c.id not in offered]
        if not fresh:
            return None
        # alternate labels so the examples do not all teach one verdict
        have = [e.get("verdict") for e in best.examples if e.get("kind") == "validation"]
        fresh.sort(key=lambda c: (have.count(c.label), c.id))
        case = fresh[0]
        offered.add(case.id)
        example = {"kind": "validation", "context": case.context, "test": case.test, "verdict": case.label}
        examples = list(best.examples)
        shots = [k for k, e in enumerate(examples) if e.get("kind") == "validation"]
        if len(shots) >= max_examples:
            examples.pop(shots[0])
        return best.revised(examples=examples + [example])

    return few_shot
