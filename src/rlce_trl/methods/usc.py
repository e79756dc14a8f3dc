"""Universal Self-Consistency as a reward (paper appendix D.1; Chen et al., 2023).

Closed labels: vote over the parseable predictions; the unique most frequent answer gets reward 1, all other rollouts
0; a tied top vote gives the group no reward (`None`, status `"tie"`). No verifier call.

Free text: ONE greedy call per group, all groups of the step in one batched `generate`. The frozen model sees the
question and the group's parseable responses only (no sample context, no options, no gold) and picks the response
most consistent with the majority. Every rollout whose response exactly matches the selected one (after stripping
surrounding whitespace) gets 1, the others 0. When all parseable responses are the same text there is nothing to
choose and no call is made. An unreadable selection gives the group no reward (status `"invalid_selection"`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from ..evidence.canonicalization import canonicalize_deterministic
from ..evidence.pipeline import EvidenceSettings
from ..evidence.state import GroupState
from ..scoring import Group, GroupResult, ScorerBase, StepStats
from ..verifiers.base import Request, Sampling, Verifier
from .baseline_prompts import parse_usc_choice, usc_messages
from .common import QuestionFn, group_question, make_result, no_reward, read_reply, vote_result, vote_scores


class USCScorer(ScorerBase):
    """Universal Self-Consistency over each rollout group.

    Args:
        verifier: the frozen selector model (free text only).
        settings: [`~rlce_trl.evidence.pipeline.EvidenceSettings`]; only `validation_max_tokens` is used, as the
            token limit of the selection reply (a number).
        question_fn: `group -> question` for the selector; defaults to the last user turn of the context.
        max_response_chars: cut each response shown to the selector to its last this-many characters (the final
            answer is at the end); `None` shows them whole.
    """

    name = "usc"

    def __init__(self, verifier: Verifier, settings: EvidenceSettings | None = None,
                 question_fn: QuestionFn | None = None, max_response_chars: int | None = None):
        self.verifier = verifier
        self.settings = settings or EvidenceSettings()
        self.question_fn = question_fn
        self.max_response_chars = max_response_chars

    def score(self, groups: Sequence[Group]) -> tuple[list[GroupResult], StepStats]:
        stats = StepStats(groups=len(groups))
        states = [canonicalize_deterministic(g, self.settings.answer_fallback) for g in groups]
        results: list[GroupResult | None] = [None] * len(states)
        jobs: list[tuple[int, list[int], Request]] = []  # (group, rollouts shown, request)
        for k, state in enumerate(states):
            stats.distinct_answers.append(state.num_answers)
            if state.num_answers == 0 or state.group.labels is not None:
                results[k] = vote_result(state)  # tie rule "none": D.1 rewards "the unique most frequent answer"
                continue
            shown = [g for g, a in enumerate(state.assignment) if a is not None]
            if len({state.group.completions[g].strip() for g in shown}) == 1:  # one distinct response: no call
                results[k] = self._select(state, shown[0], "single_response")
            else:
                jobs.append((k, shown, self._request(state, shown)))
        replies = self.verifier.generate([job[2] for job in jobs])
        for (k, shown, _), reply in zip(jobs, replies, strict=True):
            parse = functools.partial(parse_usc_choice, num_responses=len(shown))
            choice = read_reply(reply, parse, stats, "unreadable_selection")
            stats.tests_validated += 1
            stats.verdicts["invalid" if choice is None else "selected"] += 1
            if choice is None:
                results[k] = no_reward(states[k], "invalid_selection", vote_scores(states[k]))
            else:
                results[k] = self._select(states[k], shown[choice], "selected")
        for result in results:
            stats.statuses[result.status] += 1
        stats.extra["initial_ties"] = stats.statuses["tie"]
        return results, stats

    @staticmethod
    def _select(state: GroupState, rollout: int, status: str) -> GroupResult:
        chosen = state.group.completions[rollout].strip()
        verified = [1.0 if c.strip() == chosen else 0.0 for c in state.group.completions]
        answer = state.answers[state.assignment[rollout]]
        return make_result(state, verified, status, vote_scores(state), answer)

    def _request(self, state: GroupState, shown: list[int]) -> Request:
        cap = self.max_response_chars
        responses = [state.group.completions[g] for g in shown]
        if cap:
            responses = [r if len(r) <= cap else "..." + r[-cap:] for r in responses]
        sampling = Sampling(temperature=0.0, max_tokens=self.settings.validation_max_tokens)
        return Request(usc_messages(group_question(state.group, self.question_fn), responses), sampling,
                       choices=tuple(str(k + 1) for k in range(len(shown))), stage="usc_selection")
