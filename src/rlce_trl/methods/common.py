"""Pieces every baseline scorer shares: distinct answers, the question and the result record (votes are
`rlce_trl.evidence.votes`, the winners' rewards `rlce_trl.evidence.reward.rewards_for`).

Baselines reuse the RLCE canonicalization ([`~rlce_trl.evidence.canonicalization.canonicalize_deterministic`]):
closed labels map to their label, free text merges answers with the same normal form. No baseline asks the verifier
for semantic equivalence; D.1/D.2 deduplicate exact (normalized) answers only.
"""

from __future__ import annotations

from collections.abc import Callable

from ..evidence.canonicalization import canonicalize_deterministic
from ..evidence.state import GroupState
from ..scoring import Group, GroupResult
from .baseline_prompts import question_of

QuestionFn = Callable[[Group], str]


def distinct_answers(group: Group, fallback: bool = True) -> GroupState:
    """Distinct canonical answers and each rollout's answer index (`None`: nothing parseable), read exactly as RLCE
    reads them (`fallback`: a response without `\\boxed{}` answers with its one label or its whole text)."""
    return canonicalize_deterministic(group, fallback)


def group_question(group: Group, question_fn: QuestionFn | None = None) -> str:
    """The question shown to roles that must not see the sample context: `question_fn(group)` when given, else a
    `question` attribute of the group when it has one, else the last user turn of the context."""
    if question_fn is not None:
        return question_fn(group)
    explicit = getattr(group, "question", None)
    return explicit if explicit else question_of(group.context)


def make_result(
    state: GroupState,
    verified: list[float | None],
    status: str,
    scores: list[float | None] | None = None,
    verified_answer: str | None = None,
) -> GroupResult:
    return GroupResult(
        verified=verified,
        status=status,
        answers=list(state.answers),
        scores=list(scores) if scores is not None else [None] * state.num_answers,
        verified_answer=verified_answer,
        assignment=list(state.assignment),
        tests=[],
    )


def no_reward(state: GroupState, status: str, scores: list[float | None] | None = None) -> GroupResult:
    """The whole group gets no task reward (`None`), as RLCE does without a winner."""
    return make_result(state, [None] * len(state.group.completions), status, scores)
