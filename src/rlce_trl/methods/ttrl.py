"""TTRL: majority-vote pseudo-labels (Zuo et al., 2026; paper section 4.1, test-time training).

The most frequent extracted answer of the group is taken as the pseudo-label and every rollout that gives it gets
reward 1, the others 0. Answers are the RLCE distinct answers: closed labels after label matching, free text after
the deterministic normalization (`normalize_answer`); rollouts with no answer do not vote and get 0. No verifier call.

Ties: TTRL's reference implementation takes the first most common answer (`Counter.most_common(1)`), so by default a
tie is broken by first appearance in the group (`tie="first"`, status `"tie_first"`). `tie="none"` gives the group
no reward instead, like USC.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..evidence.pipeline import EvidenceSettings
from ..evidence.reward import rewards_for
from ..evidence.votes import TIE_RULES, leaders, vote_counts
from ..scoring import Group, GroupResult, ScorerBase, StepStats
from ..verifiers.base import Verifier
from .common import distinct_answers, make_result, no_reward


class TTRLScorer(ScorerBase):
    """Majority-vote reward over the group's extracted answers.

    Args:
        verifier: unused (TTRL makes no call); accepted so that every scorer is built the same way.
        settings: [`~rlce_trl.evidence.pipeline.EvidenceSettings`]; only `answer_fallback` is used.
        tie: `"first"` (TTRL: the first most common answer wins) or `"none"` (no reward on a tie).
    """

    name = "ttrl"

    def __init__(self, verifier: Verifier | None = None, settings: EvidenceSettings | None = None, tie: str = "first"):
        if tie not in TIE_RULES:
            raise ValueError(f"Unknown TTRL tie rule {tie!r}: use one of {', '.join(TIE_RULES)}.")
        self.verifier = verifier
        self.settings = settings or EvidenceSettings()
        self.tie = tie

    def score(self, groups: Sequence[Group]) -> tuple[list[GroupResult], StepStats]:
        stats = StepStats(groups=len(groups))
        results = []
        for group in groups:
            state = distinct_answers(group, self.settings.answer_fallback)
            counts = vote_counts(state.assignment, state.num_answers)
            winners = leaders(counts)  # the tie rule is self.tie: TTRL's own is "first" (Counter.most_common)
            scores = [float(c) for c in counts]
            if not winners:
                result = no_reward(state, "no_answer", scores)
            elif len(winners) > 1 and self.tie == "none":
                result = no_reward(state, "tie", scores)
            else:
                status = "voted" if len(winners) == 1 else "tie_first"
                winner = winners[0]  # answers are indexed in order of first appearance
                rewards = rewards_for(state.assignment, [winner])
                result = make_result(state, rewards, status, scores, state.answers[winner])
            stats.distinct_answers.append(state.num_answers)
            stats.statuses[result.status] += 1
            stats.extra["initial_ties"] += len(winners) > 1
            results.append(result)
        return results, stats
