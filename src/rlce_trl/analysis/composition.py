"""Compositional aggregation under test errors (paper section 4.3, Fig. 3 left).

Two curves, both computed from a group's evidence tests, their verdicts and which candidate answers are correct
(gold is used for evaluation only):

- **verdict accuracy versus the number of composed tests**: "for each training example, we randomly add tests one at
  a time without replacement"; after k tests the aggregate verdict is recomputed with Eq. 3 / Eq. 4
  ([`rlce_trl.evidence.aggregation`]) and scored against gold. Abstained tests (unknown, unreadable) never change a
  verdict, so only tests with an outcome are composed. A group counts at k only if it has at least k such tests.
- **verdict accuracy versus the fraction of incorrect tests**: a test is *informative* when exactly one of its two
  answers is correct; its validated outcome is *incorrect* when it supports the incorrect answer, i.e. when
  `z != [favoured answer is correct]` (a satisfied test favouring the wrong answer, or an unsatisfied test favouring
  the right one). The fraction is over informative, non-abstained tests; groups are binned by it (0-20%, 20-40%...).

A verdict is correct when the best-supported answer is a correct answer. On a tie the pipeline gives no reward; for
accuracy a tie earns the expected credit of a uniform tie-break, `correct winners / tied winners` (`ties="random"`,
the default: with one test and two answers an unsatisfied test leaves a tie, worth 1/2), or 0 (`ties="wrong"`).
Pointwise tests (`against is None`) are aggregated as in the pointwise ablation: the best-supported answer is the one
with the highest fraction of satisfied tests.

Eligible groups: at least two distinct answers, at least one correct and one incorrect (otherwise every verdict is
right, or every verdict wrong, whatever the tests say), and at least one test with an outcome.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..evidence.aggregation import mean, pointwise_scores, select_verified, verification_scores
from ..evidence.state import EvidenceTest

TIE_RULES = ("random", "wrong")
#: Bins of the fraction of incorrect tests, as in Fig. 3 (left, top): [0, .2), [.2, .4), ... [.8, 1].
DEFAULT_BINS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


def as_tests(entries: Iterable[dict]) -> list[EvidenceTest]:
    """Logged tests (`{"favoured", "against", "verdict"}` dicts) as [`EvidenceTest`]s."""
    return [EvidenceTest(int(e["favoured"]), None if e.get("against") is None else int(e["against"]), e.get("text"),
                         e.get("verdict")) for e in entries]


def eligible(answer_correct: Sequence[bool]) -> bool:
    """At least one correct and one incorrect candidate answer."""
    return any(answer_correct) and not all(answer_correct)


def verdict_credit(
    tests: Sequence[EvidenceTest], answer_correct: Sequence[bool], ties: str = "random"
) -> float | None:
    """Credit of the aggregate verdict of `tests`: 1 correct, 0 wrong, a fraction for a tie (see `ties`); `None`
    when no answer has any evidence (every test abstained)."""
    if ties not in TIE_RULES:
        raise ValueError(f"Unknown tie rule {ties!r}: use one of {', '.join(TIE_RULES)}.")
    n = len(answer_correct)
    pointwise = any(t.against is None for t in tests)
    scores = pointwise_scores(n, tests) if pointwise else verification_scores(n, tests)
    winners = select_verified(scores)  # Eq. 4: the highest verification score (pointwise: highest satisfied share)
    if not winners:
        return None
    if len(winners) == 1:
        return float(answer_correct[winners[0]])
    return sum(answer_correct[w] for w in winners) / len(winners) if ties == "random" else 0.0


def is_incorrect_test(test: EvidenceTest, answer_correct: Sequence[bool]) -> bool | None:
    """Whether a test's validated outcome supports an incorrect answer; `None` for an abstained or uninformative
    test (both answers correct, or both incorrect)."""
    if test.outcome is None:
        return None
    favoured = answer_correct[test.favoured]
    if test.against is not None and answer_correct[test.against] == favoured:
        return None
    return test.outcome != int(favoured)


def incorrect_fraction(tests: Sequence[EvidenceTest], answer_correct: Sequence[bool]) -> float | None:
    """Fraction of informative, non-abstained tests whose outcome supports an incorrect answer."""
    return mean([f for f in (is_incorrect_test(t, answer_correct) for t in tests) if f is not None])


def composition_curve(
    tests: Sequence[EvidenceTest],
    answer_correct: Sequence[bool],
    max_tests: int,
    permutations: int,
    rng: np.random.Generator,
    ties: str = "random",
) -> list[float | None]:
    """Verdict credit after composing 1..`max_tests` tests added in random order without replacement, averaged over
    `permutations` orders; `None` at k beyond the group's number of tests with an outcome."""
    usable = [t for t in tests if t.outcome is not None]
    top = min(max_tests, len(usable))
    sums = [0.0] * top
    for _ in range(permutations):
        order = rng.permutation(len(usable))
        for k in range(1, top + 1):
            credit = verdict_credit([usable[i] for i in order[:k]], answer_correct, ties)
            sums[k - 1] += credit if credit is not None else 0.0
    return [s / permutations for s in sums] + [None] * (max_tests - top)


@dataclass
class CurvePoint:
    x: float | str
    accuracy: float | None
    groups: int


def accuracy_vs_num_tests(
    groups: Iterable[tuple[Sequence[EvidenceTest], Sequence[bool]]],
    max_tests: int = 12,
    permutations: int = 20,
    seed: int = 0,
    ties: str = "random",
) -> list[CurvePoint]:
    """Aggregate-verdict accuracy at k = 1..`max_tests` composed tests, over eligible `(tests, answer_correct)`
    groups: the mean of the per-group curves among the groups that have at least k tests."""
    rng = np.random.default_rng(seed)
    credits: list[list[float]] = [[] for _ in range(max_tests)]
    for tests, answer_correct in groups:
        if not eligible(answer_correct):
            continue
        for k, credit in enumerate(composition_curve(tests, answer_correct, max_tests, permutations, rng, ties)):
            if credit is not None:
                credits[k].append(credit)
    return [CurvePoint(k + 1, mean(c), len(c)) for k, c in enumerate(credits)]


def accuracy_vs_incorrect_fraction(
    groups: Iterable[tuple[Sequence[EvidenceTest], Sequence[bool]]],
    bins: Sequence[float] = DEFAULT_BINS,
    ties: str = "random",
) -> list[CurvePoint]:
    """Aggregate-verdict accuracy (all of a group's tests composed) by the group's fraction of incorrect tests; the
    last bin is closed on the right."""
    credits: list[list[float]] = [[] for _ in range(len(bins) - 1)]
    for tests, answer_correct in groups:
        if not eligible(answer_correct):
            continue
        fraction = incorrect_fraction(tests, answer_correct)
        credit = verdict_credit(tests, answer_correct, ties)
        if fraction is not None and credit is not None:
            credits[min(int(np.searchsorted(bins, fraction, side="right")) - 1, len(bins) - 2)].append(credit)
    return [CurvePoint(f"{round(100 * bins[b])}-{round(100 * bins[b + 1])}%", mean(c), len(c))
            for b, c in enumerate(credits)]


def overall_verdict_accuracy(
    groups: Iterable[tuple[Sequence[EvidenceTest], Sequence[bool]]], ties: str = "random"
) -> tuple[float | None, int]:
    """Mean verdict credit with all tests composed, over eligible groups with evidence: `(accuracy, groups)`."""
    credits = [c for tests, correct in groups if eligible(correct)
               for c in [verdict_credit(tests, correct, ties)] if c is not None]
    return mean(credits), len(credits)
