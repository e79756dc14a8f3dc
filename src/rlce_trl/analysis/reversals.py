"""How often a method reverses USC's or the Policy-Judge's wrong preferences (paper section 4.2, Fig. 2 middle and
right).

A *wrong preference* of a reference method (USC, Policy LLM-Judge) is a pair of rollouts of one group, one correct
and one incorrect, where the reference gives the incorrect rollout a strictly higher reward: it "selects an incorrect
rollout over a correct one". A method *reverses* it when it gives the correct rollout of that pair a strictly higher
reward than the incorrect one; an equal reward (including no reward at all) does not reverse it.

    reversal rate = reversed wrong preferences / wrong preferences of the reference

counted over rollout pairs pooled across groups (`rate`); `group_rate` weighs every group with at least one wrong
preference equally (the mean over those groups of the fraction of its wrong preferences reversed). A reference
group with no reward (`None`: a USC tie) expresses no preference and contributes no pair; a method's `None` is 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .variation import EPS, _values


def wrong_preferences(reference: Sequence[float | None], correct: Sequence[bool]) -> list[tuple[int, int]]:
    """`(correct rollout, incorrect rollout)` pairs that the reference ranks the wrong way round (none when it gives
    no reward at all: its `None`s are equal zeros)."""
    ref = _values(reference)
    return [
        (c, w)
        for c in range(len(ref)) if correct[c]
        for w in range(len(ref)) if not correct[w] and ref[w] > ref[c] + EPS
    ]


def reversal_counts(
    reference: Sequence[float | None], method: Sequence[float | None], correct: Sequence[bool]
) -> tuple[int, int]:
    """`(wrong preferences of the reference, how many of them the method reverses)` in one group."""
    pairs = wrong_preferences(reference, correct)
    values = _values(method)
    return len(pairs), sum(1 for c, w in pairs if values[c] > values[w] + EPS)


@dataclass
class ReversalRate:
    """`rate`: pooled over pairs; `group_rate`: mean over groups with a wrong preference; `cases`: wrong preferences
    (pairs); `groups`: groups with at least one."""

    rate: float | None
    group_rate: float | None
    cases: int
    reversed: int
    groups: int


def reversal_rate(
    groups: Iterable[tuple[Sequence[float | None], Sequence[float | None], Sequence[bool]]],
) -> ReversalRate:
    """Reversal rate over `(reference rewards, method rewards, correct)` groups."""
    cases = done = 0
    per_group = []
    for reference, method, correct in groups:
        n, k = reversal_counts(reference, method, correct)
        if n:
            cases += n
            done += k
            per_group.append(k / n)
    if not cases:
        return ReversalRate(None, None, 0, 0, 0)
    return ReversalRate(done / cases, sum(per_group) / len(per_group), cases, done, len(per_group))
