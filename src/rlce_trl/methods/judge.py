"""Policy LLM-Judge as a reward (paper appendix D.2; adapted from Self-Rewarding LMs, Yuan et al., 2024).

Each distinct answer of a group is judged once, pointwise: the frozen model sees the question, the available input
evidence (the context and the clip) and that single answer (for closed labels, not the other options: the options
line is removed), and answers Yes or No under guided choice, greedily. On free text the unit is the proposed
*response* (D.2): each distinct response (whitespace aside) is judged once, in full (capped like every answer in a
verifier prompt). A parsed "Yes" gives reward 1 to every rollout with that answer (response); "No", an unreadable
reply and rollouts with no answer get 0. All judgments of the step go out in ONE batched `generate`.

Several answers, or none, may be judged correct: the group's rewards are then all 1 or all 0 (no GRPO signal), which
is the method's behaviour, not a missing reward. A group with no parseable answer gets no reward (`None`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..evidence.pipeline import EvidenceSettings
from ..evidence.prompts import cap_answer, context_without_options
from ..evidence.reward import rewards_for
from ..evidence.state import GroupState
from ..scoring import Group, GroupResult, ScorerBase, StepStats
from ..verifiers.base import Request, Sampling, Verifier
from .baseline_prompts import YES_NO, judge_messages, parse_yes_no
from .common import distinct_answers, make_result, no_reward


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
        units = {id(s): self._units(s) for s in states}
        jobs: list[tuple[GroupState, int]] = [(s, i) for s in states for i in range(len(units[id(s)][0]))]
        requests = [self._request(s, units[id(s)][0][i]) for s, i in jobs]
        verdicts: dict[int, list[str | None]] = {id(s): [None] * len(units[id(s)][0]) for s in states}
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
            elif state.group.labels is None:  # free text: the responses were judged
                result = self._response_result(state, units[id(state)][1], verdicts[id(state)])
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

    @staticmethod
    def _units(state: GroupState) -> tuple[list[str], list[int | None]]:
        """What is judged, and each rollout's index into it: the distinct answers on closed labels; on free text the
        distinct responses (D.2, "proposed response"; whitespace aside), a rollout with no answer judged never."""
        if state.group.labels is not None:
            return list(state.answers), list(state.assignment)
        texts: list[str] = []
        index: dict[str, int] = {}
        assignment: list[int | None] = []
        for completion, answer in zip(state.group.completions, state.assignment, strict=True):
            key = " ".join(completion.split())
            if answer is None or not key:
                assignment.append(None)
                continue
            assignment.append(index.setdefault(key, len(texts)))
            if len(texts) < len(index):
                texts.append(completion.strip())
        return texts, assignment

    @staticmethod
    def _response_result(state: GroupState, assignment: list[int | None], judged: list[str | None]) -> GroupResult:
        """Free text: each rollout gets its response's judgment; an answer's score is the share of its rollouts
        judged correct (None when none was readable), the verified answer the one answer all of whose rollouts
        were."""
        rewards = [1.0 if u is not None and judged[u] == "yes" else 0.0 for u in assignment]
        scores: list[float | None] = []
        for i in range(state.num_answers):
            mine = [judged[u] for u, a in zip(assignment, state.assignment, strict=True) if a == i and u is not None]
            read = [v for v in mine if v is not None]
            scores.append(sum(v == "yes" for v in read) / len(read) if read else None)
        accepted = [i for i, score in enumerate(scores) if score == 1.0]
        status = "judged" if any(r == 1.0 for r in rewards) else "none_correct"
        return make_result(state, rewards, status, scores, state.answers[accepted[0]] if len(accepted) == 1 else None)

    def _request(self, state: GroupState, proposed: str) -> Request:
        context = context_without_options(state.group.context, state.group.labels)
        response = state.group.labels is None
        return Request(
            messages=judge_messages(context, cap_answer(proposed) if response else proposed, response=response),
            sampling=Sampling(temperature=0.0, max_tokens=self.settings.validation_max_tokens),
            choices=YES_NO,
            stage="judge",
            media=state.group.media,  # D.2: "the available input evidence", the clip included
        )
