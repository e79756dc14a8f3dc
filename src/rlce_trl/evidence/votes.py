"""Majority votes over answers: one tally, one ranking, and a tie rule every call site names ([`majority`]):

- `"first"`: the tied answer given first wins (TTRL's `Counter.most_common`, VisPlay's `max` over an
  insertion-ordered dict, Elect's majority fallback, majority-vote selection);
- `"none"`: a tie has no majority (USC on closed labels, D.1: "the unique most frequent answer"; the health
  monitor's majority).

The rule is the paper's where a paper names one; each call site says which and why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

H = TypeVar("H", bound=Hashable)

TIE_RULES = ("first", "none")


def tally(votes: Iterable[H | None]) -> dict[H, int]:
    """Votes per answer, in order of first appearance; `None` (no answer) is no vote."""
    return dict(Counter(v for v in votes if v is not None))


def vote_counts(assignment: Sequence[int | None], num_answers: int) -> list[int]:
    """The tally of a group's answer indices as a list: how many rollouts gave distinct answer `i` (0 for none)."""
    counts = tally(assignment)
    return [counts.get(i, 0) for i in range(num_answers)]


def ranking(counts: Mapping[H, float]) -> list[tuple[H, float]]:
    """`(answer, votes)` with the most votes first; equal counts keep the mapping's order (first appearance)."""
    return sorted(counts.items(), key=lambda item: -item[1])


def leaders(counts: Mapping[H, float] | Sequence[float]) -> list[H]:
    """The answers with the most votes, in the mapping's order (a list of counts: its indices); `[]` when nobody
    voted. Several leaders are a tie the caller resolves by its rule."""
    if not isinstance(counts, Mapping):
        counts = dict(enumerate(counts))
    top = max(counts.values(), default=0)
    return [answer for answer, count in counts.items() if count == top] if top > 0 else []


def majority(votes: Iterable[H | None], tie: str) -> H | None:
    """The majority answer of `votes` under tie rule `tie` (`"first"` or `"none"`, see the module); `None` when
    nobody voted, or on a tie under `"none"`."""
    if tie not in TIE_RULES:
        raise ValueError(f"Unknown tie rule {tie!r}: use one of {', '.join(TIE_RULES)}.")
    best = leaders(tally(votes))
    if not best or (tie == "none" and len(best) > 1):
        return None
    return best[0]
