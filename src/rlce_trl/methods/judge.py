"""Policy LLM-Judge as a reward (paper appendix D.2; adapted from Self-Rewarding LMs, Yuan et al., 2024).

Each distinct answer of a group is judged once, pointwise: the frozen model sees the question, the available input
evidence and that single answer (for closed labels, not the other options: the options line is removed), and answers
Yes or No under guided choice, greedily. A parsed "Yes" gives reward 1 to every rollout with that answer; "No", an
unreadable reply and rollouts with no answer get 0. All judgments of the step go out in ONE batched `generate`.

Several answers, or none, may be judged correct: the group's rewards are then all 1 or all 0 (no GRPO signal), which
is the method's behaviour, not a missing reward. A group with no parseable answer gets no reward (`None`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..evidence.pipeline import EvidenceSettings
from ..evidence.prompts import context_without_options
from ..evidence.state import GroupState
from ..scoring import Group, GroupResult, ScorerBase, StepStats
from ..verifiers.base import Request, Sampling, Verifier
from .baseline_prompts import YES_NO, judge_messages, parse_yes_no
from .common import distinct_answers, make_result, no_reward, rewards_for


class PolicyJudgeScorer(ScorerBase):
    """Pointwise Yes/No judgment of every distinct answer.

    Args:
        verifier: the frozen judge (the same model as the RLCE validator).
        settings: [`~rlce_trl.evidence.pipeline.EvidenceSettings`]; `validation_max_tokens` caps the judgment reply.
    """

    name = "policy_judge"

    def __init__(self, verifier: Verifier, settings: EvidenceSettings | None = None):
        self.verifier = verifier
        self.settings = settings or EvidenceSettings()

    def score(self, groups: Sequence[Group]) -> tuple[list[GroupResult], StepStats]:
        stats = StepStats(groups=len(groups))
        states = [distinct_answers(g, self.settings.answer_fallback) for g in groups]
        jobs: list[tuple[GroupState, int]] = [(s, i) for s in states for i in range(s.num_answers)]
        requests = [self._request(s, i) for s, i in jobs]
        verdicts: dict[int, list[str | None]] = {id(s): [None] * s.num_answers for s in states}
        for (state, i), reply in zip(jobs, self.verifier.generate(requests), strict=True):
            text = reply.texts[0] if reply.texts and reply.error is None else ""
            verdict = parse_yes_no(text)
            verdicts[id(state)][i] = verdict
            stats.tests_validated += 1
            stats.verdicts[verdict or "invalid"] += 1
            if verdict is None:
                stats.verdict_failures["error" if reply.error else "unreadable_judgment"] += 1
        results = []
        for state in states:
            stats.distinct_answers.append(state.num_answers)
            if state.num_answers == 0:
                result = no_reward(state, "no_answer")
            else:
                judged = verdicts[id(state)]
                scores: list[float | None] = [None if v is None else float(v == "yes") for v in judged]
                winners = [i for i, v in enumerate(judged) if v == "yes"]
                status = "judged" if winners else "none_correct"
                # one accepted answer is "the" verified answer; several are listed in scores only
                answer = state.answers[winners[0]] if len(winners) == 1 else None
                result = make_result(state, rewards_for(state.assignment, winners), status, scores, answer)
            stats.statuses[result.status] += 1
            results.append(result)
        return results, stats

    def _request(self, state: GroupState, answer: int) -> Request:
        context = context_without_options(state.group.context, state.group.labels)
        return Request(
            messages=judge_messages(context, state.answers[answer]),
            sampling=Sampling(temperature=0.0, max_tokens=self.settings.validation_max_tokens),
            choices=YES_NO,
            stage="judge",
        )
