"""Compositional aggregation (section 3.2): Eq. 3 verification scores, Eq. 4 selection, ties.

Pure arithmetic over test outcomes z(t) ∈ {1, 0, None}; None (abstained) tests are left out of every mean.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from .state import EvidenceTest

#: Scores closer than this are equal: Eq. 3 means over a handful of tests are exact fractions.
TIE_TOLERANCE = 1e-9


def mean(values: Sequence[float]) -> float | None:
    """The arithmetic mean of `values`, `None` when there are none (not 0)."""
    return sum(values) / len(values) if values else None


def verification_scores(num_answers: int, tests: Sequence[EvidenceTest]) -> list[float | None]:
    """Eq. 3: `V(a_i) = mean z over supporting tests - mean z over contradicting tests`.

    Each mean runs over the non-abstained tests only. An answer with no surviving supporting (or contradicting) test
    takes 0 for that term: no evidence either way. An answer with no surviving test at all has no score (`None`)."""
    scores: list[float | None] = []
    for i in range(num_answers):
        support = mean([t.outcome for t in tests if t.favoured == i and t.outcome is not None])
        contra = mean([t.outcome for t in tests if t.against == i and t.outcome is not None])
        scores.append(None if support is None and contra is None else (support or 0.0) - (contra or 0.0))
    return scores


def select_verified(scores: Sequence[float | None]) -> list[int]:
    """Eq. 4: the indices of the highest verification score. One index = a verified answer; several = a tie;
    none = no answer has any evidence."""
    scored = [(i, s) for i, s in enumerate(scores) if s is not None]
    if not scored:
        return []
    best = max(s for _, s in scored)
    return [i for i, s in scored if best - s <= TIE_TOLERANCE]


def unresolved_pairs(tied: Sequence[int]) -> list[tuple[int, int]]:
    """The comparisons a tie leaves open: every ordered pair among the tied answers (both directions)."""
    return [p for i, j in itertools.combinations(sorted(tied), 2) for p in ((i, j), (j, i))]


def pointwise_scores(num_answers: int, tests: Sequence[EvidenceTest]) -> list[float | None]:
    """Pointwise ablation: the fraction of an answer's own non-abstained tests that are satisfied."""
    return [mean([t.outcome for t in tests if t.favoured == i and t.outcome is not None]) for i in range(num_answers)]


def pointwise_winners(scores: Sequence[float | None]) -> list[int]:
    """Pointwise ablation: every answer a strict majority of whose tests are satisfied is rewarded."""
    return [i for i, s in enumerate(scores) if s is not None and s > 0.5]
