"""The pseudo-label rewards of VisPlay's reasoner and Video-Zero's solver as group scorers: a reward over the row's
dataset columns (read through `Group.columns`), no verifier call."""

from __future__ import annotations

from collections.abc import Sequence

from ..scoring import Group, GroupResult, ScorerBase, StepStats
from .common import reward_result


class _ColumnRewardScorer(ScorerBase):
    """A reward over the row's dataset columns (`columns`, read through `Group.columns`) as a group scorer; no
    verifier call, no options. A row without a pseudo-label gets `None`."""

    def __init__(self, verifier=None, settings=None, *, partner=None):
        pass  # no options: an unknown `reward_method_kwargs` key is a TypeError that build_scorer names

    def reward(self, completion: str, columns: dict, labels) -> float:
        raise NotImplementedError

    def score(self, groups: Sequence[Group]) -> tuple[list[GroupResult], StepStats]:
        results = []
        for g in groups:
            columns = g.columns or {}
            has_label = bool(columns.get("pseudo_label"))
            rewards = [self.reward(c, columns, g.labels) if has_label else None for c in g.completions]
            results.append(reward_result(rewards, "pseudo_label" if has_label and rewards else "no_label"))
        return results, StepStats(groups=len(groups))


class PseudoLabelScorer(_ColumnRewardScorer):
    """VisPlay's reasoner reward (`visplay.reasoner_reward` over the row's `pseudo_label`)."""

    name = "visplay_reasoner"
    columns = ("pseudo_label",)

    def reward(self, completion: str, columns: dict, labels) -> float:
        from .visplay import reasoner_reward

        return reasoner_reward(completion, columns["pseudo_label"], labels)


class VZSolverScorer(_ColumnRewardScorer):
    """Video-Zero's solver reward (`video_zero.solver_reward` over `pseudo_label`, `target_span`, `clip_seconds`)."""

    name = "vz_solver"
    columns = ("pseudo_label", "target_span", "clip_seconds")

    def reward(self, completion: str, columns: dict, labels) -> float:
        from .video_zero import solver_reward

        span = columns.get("target_span")
        span = tuple(span) if span is not None and len(span) == 2 else None
        return solver_reward(completion, columns["pseudo_label"], span, columns.get("clip_seconds"), labels)
