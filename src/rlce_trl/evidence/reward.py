"""Reward assignment (section 3.3, Eq. 5; appendix C.2).

`r_g = w_ver * r_ver + w_fmt * r_fmt`, by default `0.8 * [canon(a_g) == â] + 0.2 * [a_g ends in \\boxed{}]`.
The two parts are separate reward functions so that TRL's `reward_weights` combine them and log each one; the
verification part is `None` ("no verification reward") for a whole group when verification gives no winner, and TRL
then counts it as 0 in the weighted sum, as the paper does.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from .answers import ends_with_boxed
from .state import GroupState


def verified_rewards(state: GroupState) -> list[float | None]:
    """Eq. 5 per rollout: 1.0 if its canonical answer is a verified answer, else 0.0; all `None` without a winner.

    Pairwise RLCE has at most one winner; the pointwise ablation may reward several answers."""
    if not state.winners:
        return [None] * len(state.group.completions)
    return rewards_for(state.assignment, state.winners)


def rewards_for(assignment: Sequence[int | None], winners: Collection[int]) -> list[float]:
    """The one rule "the verified answer gets the reward": 1.0 for a rollout whose answer is one of `winners`, else
    0.0 (a rollout with no answer never wins). RLCE and every baseline reward through it."""
    return [1.0 if a is not None and a in winners else 0.0 for a in assignment]


def format_reward(completion: str) -> float:
    """r_fmt: 1.0 if the response ends in the required `\\boxed{}` answer format, else 0.0."""
    return 1.0 if ends_with_boxed(completion) else 0.0
