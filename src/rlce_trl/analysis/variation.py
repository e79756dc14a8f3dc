"""Share of reward variation between correct and incorrect rollouts (paper section 4.2, Fig. 2 left).

In GRPO the within-group reward differences set the advantages, so the part of a group's reward variation that
separates correct from incorrect rollouts is the part of the learning signal aligned with the task. We measure it
with the one-way analysis-of-variance split of the group's rewards by correctness (eta squared):

    total variation    SS_total(group)   = sum_g (r_g - mean r)^2
    between variation  SS_between(group) = n_correct (mean r_correct - mean r)^2 + n_wrong (mean r_wrong - mean r)^2
    share of variation between correct and incorrect = SS_between / SS_total

SS_between / SS_total is 1 when rewards are constant within the correct and within the incorrect rollouts and
differ between them, 0 when the correct and the incorrect rollouts have the same mean reward (e.g. a group whose
rollouts are all correct, or rubric scores that differ only by wording). Like the paper, only groups with reward
variation (`SS_total > 0`) count. Across groups the *pooled* share is `sum SS_between / sum SS_total` (the fraction
of all reward variation, the paper's "fraction of total reward variation"); the mean of the per-group shares is
reported beside it. A group-level `None` reward (no reward given) is 0, as in TRL's weighted sum.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: Variation below this is none: rewards are sums of a few exact fractions.
EPS = 1e-12


def _values(rewards: Sequence[float | None]) -> list[float]:
    return [0.0 if r is None else float(r) for r in rewards]


def variation_split(rewards: Sequence[float | None], correct: Sequence[bool]) -> tuple[float, float]:
    """`(SS_between, SS_total)` of one group's rewards split by rollout correctness (see the module docstring)."""
    if len(rewards) != len(correct):
        raise ValueError(f"{len(rewards)} rewards for {len(correct)} correctness flags.")
    values = _values(rewards)
    if not values:
        return 0.0, 0.0
    mean = sum(values) / len(values)
    total = sum((v - mean) ** 2 for v in values)
    between = 0.0
    for flag in (True, False):
        if part := [v for v, c in zip(values, correct, strict=True) if bool(c) == flag]:
            between += len(part) * (sum(part) / len(part) - mean) ** 2
    return between, total


@dataclass
class VariationShare:
    """Aggregate over groups: `pooled = sum between / sum total`, `mean` of the per-group shares, `groups` with
    variation counted, out of `considered`."""

    pooled: float | None
    mean: float | None
    groups: int
    considered: int


def variation_share(groups: Iterable[tuple[Sequence[float | None], Sequence[bool]]]) -> VariationShare:
    """Share of reward variation between correct and incorrect rollouts over `(rewards, correct)` groups; groups
    without reward variation are left out."""
    between_sum = total_sum = 0.0
    shares = []
    considered = 0
    for rewards, correct in groups:
        considered += 1
        between, total = variation_split(rewards, correct)
        if total <= EPS:
            continue
        between_sum += between
        total_sum += total
        shares.append(between / total)
    if not shares:
        return VariationShare(None, None, 0, considered)
    return VariationShare(between_sum / total_sum, sum(shares) / len(shares), len(shares), considered)


def pairwise_ordering(rewards: Sequence[float | None], correct: Sequence[bool]) -> tuple[int, int, int]:
    """Over every (correct, incorrect) rollout pair of a group: `(pairs, correct ranked higher, incorrect ranked
    higher)`. Ties are the remainder. A finer view of the same signal: the GRPO advantage favours the correct
    rollout exactly when its reward is higher."""
    values = _values(rewards)
    right = [v for v, c in zip(values, correct, strict=True) if c]
    wrong = [v for v, c in zip(values, correct, strict=True) if not c]
    pairs = len(right) * len(wrong)
    up = sum(1 for a in right for b in wrong if a > b + EPS)
    down = sum(1 for a in right for b in wrong if b > a + EPS)
    return pairs, up, down
