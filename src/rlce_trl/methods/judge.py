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

from ..evidence.canonicalization import canonicalize_deterministic
from ..evidence.pipeline import EvidenceSettings
from ..evidence.prompts import cap_answer, context_without_options
from ..evidence.state import GroupState
from ..scoring import Group, GroupResult, ScorerBase, StepStats
from ..verifiers.base import Request, Sampling, Verifier
from .baseline_prompts import YES_NO, judge_messages, parse_yes_no
from .common import make_result, no_reward, only_answer, read_reply


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
        states = [canonicalize_deterministic(g, self.settings.answer_fallback) for g in groups]
        units = [self._units(s) for s in states]
        jobs = [(k, text) for k, (texts, _) in enumerate(units) for text in texts]
        replies = self.verifier.generate([self._request(states[k], text) for k, text in jobs])
        verdicts: list[list[str | None]] = [[] for _ in states]
        for (k, _), reply in zip(jobs, replies, strict=True):
            verdict = read_reply(reply, parse_yes_no, stats, "unreadable_judgment")
            verdicts[k].append(verdict)
            stats.tests_validated += 1
            stats.verdicts[verdict or "invalid"] += 1
        results = []
        for state, (_, assignment), judged in zip(states, units, verdicts, strict=True):
            stats.distinct_answers.append(state.num_answers)
            result = self._result(state, assignment, judged) if state.num_answers else no_reward(state, "no_answer")
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
    def _result(state: GroupState, assignment: list[int | None], judged: list[str | None]) -> GroupResult:
        """Each rollout gets its unit's judgment; an answer's score is the share of its rollouts judged correct (None
        when none was readable), the verified answer the one answer all of whose rollouts were. On closed labels the
        units are the answers, so an answer's score is its own judgment; several accepted answers name none."""
        rewards = [1.0 if u is not None and judged[u] == "yes" else 0.0 for u in assignment]
        scores: list[float | None] = []
        for i in range(state.num_answers):
            mine = [judged[u] for u, a in zip(assignment, state.assignment, strict=True) if a == i and u is not None]
            read = [v for v in mine if v is not None]
            scores.append(sum(v == "yes" for v in read) / len(read) if read else None)
        accepted = [i for i, score in enumerate(scores) if score == 1.0]
        status = "judged" if any(r == 1.0 for r in rewards) else "none_correct"
        return make_result(state, rewards, status, scores, only_answer(state, accepted))

    def _request(self, state: GroupState, proposed: str) -> Request:
        context = context_without_options(state.group.context, state.group.labels)
        response = state.group.labels is None
        messages = judge_messages(context, cap_answer(proposed) if response else proposed, response=response)
        sampling = Sampling(temperature=0.0, max_tokens=self.settings.validation_max_tokens)
        # D.2: "the available input evidence", the clip included
        return Request(messages, sampling, choices=YES_NO, stage="judge", media=state.group.media)
