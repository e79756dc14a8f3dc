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

from ..evidence.canonicalization import canonicalize_deterministic
from ..evidence.pipeline import EvidenceSettings
from ..evidence.votes import TIE_RULES
from ..scoring import Group, GroupResult, ScorerBase, StepStats
from ..verifiers.base import Verifier
from .common import vote_result


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
            state = canonicalize_deterministic(group, self.settings.answer_fallback)
            result = vote_result(state, self.tie)  # TTRL's own tie rule is "first" (Counter.most_common)
            stats.distinct_answers.append(state.num_answers)
            stats.statuses[result.status] += 1
            stats.extra["initial_ties"] += result.status in ("tie", "tie_first")
            results.append(result)
        return results, stats
