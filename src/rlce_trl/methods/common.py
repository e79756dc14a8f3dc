"""Pieces every scorer of this package shares: the question, the verifier's reply read once, the majority vote
and the result records (votes are `rlce_trl.evidence.votes`, the winners' rewards
`rlce_trl.evidence.reward.rewards_for`).

Baselines read their distinct answers with the RLCE canonicalization
([`~rlce_trl.evidence.canonicalization.canonicalize_deterministic`]): closed labels map to their label, free text
merges answers with the same normal form. No baseline asks the verifier for semantic equivalence; D.1/D.2 deduplicate
exact (normalized) answers only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..evidence.reward import rewards_for
from ..evidence.state import GroupState
from ..evidence.votes import leaders, vote_counts
from ..scoring import Group, GroupResult, StepStats
from ..verifiers.base import Reply
from .baseline_prompts import question_of

QuestionFn = Callable[[Group], str]


def group_question(group: Group, question_fn: QuestionFn | None = None) -> str:
    """The question shown to roles that must not see the sample context: `question_fn(group)` when given, else a
    `question` attribute of the group when it has one, else the last user turn of the context."""
    if question_fn is not None:
        return question_fn(group)
    explicit = getattr(group, "question", None)
    return explicit if explicit else question_of(group.context)


def make_result(state: GroupState, verified: list[float | None], status: str, scores: list[float | None] | None = None,
                verified_answer: str | None = None) -> GroupResult:
    """A result over the state's distinct answers; `scores` default to `None` per answer."""
    scores = list(scores) if scores is not None else [None] * state.num_answers
    return GroupResult(verified=verified, status=status, answers=list(state.answers), scores=scores,
                       verified_answer=verified_answer, assignment=list(state.assignment), tests=[])


def no_reward(state: GroupState, status: str, scores: list[float | None] | None = None) -> GroupResult:
    """The whole group gets no task reward (`None`), as RLCE does without a winner."""
    return make_result(state, [None] * len(state.group.completions), status, scores)


def only_answer(state: GroupState, indices: Sequence[int]) -> str | None:
    """The answer at `indices` when there is exactly one index, else `None` (several winners name none)."""
    return state.answers[indices[0]] if len(indices) == 1 else None


def vote_scores(state: GroupState) -> list[float | None]:
    """Each distinct answer's vote count, as the result's `scores`."""
    return [float(c) for c in vote_counts(state.assignment, state.num_answers)]


def vote_result(state: GroupState, tie: str = "none") -> GroupResult:
    """The majority vote as a result: the rollouts of the most frequent answer get 1, the others 0. No answer: no
    reward (`"no_answer"`); a tied top vote gives no reward under `tie="none"` (`"tie"`) and the first answer given
    under `tie="first"` (`"tie_first"`; answers are indexed in order of first appearance)."""
    winners = leaders(vote_counts(state.assignment, state.num_answers))
    scores = vote_scores(state)
    if not winners:
        return no_reward(state, "no_answer", scores)
    if len(winners) > 1 and tie == "none":
        return no_reward(state, "tie", scores)
    status = "voted" if len(winners) == 1 else "tie_first"
    return make_result(state, rewards_for(state.assignment, winners[:1]), status, scores, state.answers[winners[0]])


def reward_result(rewards: list[float | None], status: str, extra: dict | None = None) -> GroupResult:
    """A result that carries per-rollout rewards only (no distinct answers): the co-evolution phases' scorers."""
    return GroupResult(verified=rewards, status=status, answers=[], scores=[], verified_answer=None,
                       assignment=[None] * len(rewards), extra=extra or {})


def read_reply(reply: Reply, parse: Callable[[str], object], stats: StepStats, unreadable: str):
    """`parse` of the reply's first text; `None` when the backend failed or the text does not parse, counted in
    `stats.verdict_failures` as `error` or `unreadable`."""
    value = parse(reply.texts[0] if reply.texts and reply.error is None else "")
    if value is None:
        stats.verdict_failures["error" if reply.error else unreadable] += 1
    return value
