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

from collections.abc import Sequence

from ..evidence.pipeline import EvidenceSettings
from ..evidence.reward import rewards_for
from ..evidence.state import GroupState
from ..evidence.votes import leaders, vote_counts
from ..scoring import Group, GroupResult, ScorerBase, StepStats
from ..verifiers.base import Request, Sampling, Verifier
from .baseline_prompts import parse_usc_choice, usc_messages
from .common import QuestionFn, distinct_answers, group_question, make_result, no_reward


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

    def __init__(
        self,
        verifier: Verifier,
        settings: EvidenceSettings | None = None,
        question_fn: QuestionFn | None = None,
        max_response_chars: int | None = None,
    ):
        self.verifier = verifier
        self.settings = settings or EvidenceSettings()
        self.question_fn = question_fn
        self.max_response_chars = max_response_chars

    def score(self, groups: Sequence[Group]) -> tuple[list[GroupResult], StepStats]:
        stats = StepStats(groups=len(groups))
        states = [distinct_answers(g, self.settings.answer_fallback) for g in groups]
        results: list[GroupResult | None] = [None] * len(states)
        jobs: list[tuple[int, list[int], Request]] = []  # (group, rollouts shown, request)
        for k, state in enumerate(states):
            stats.distinct_answers.append(state.num_answers)
            counts = vote_counts(state.assignment, state.num_answers)
            scores = [float(c) for c in counts]
            if state.num_answers == 0:
                results[k] = no_reward(state, "no_answer", scores)
            elif state.group.labels is not None:
                results[k] = self._closed(state, counts)
            else:
                shown = [g for g, a in enumerate(state.assignment) if a is not None]
                texts = {state.group.completions[g].strip() for g in shown}
                if len(texts) == 1:  # one distinct response: it is the consensus, no call needed
                    results[k] = self._select(state, shown[0], "single_response")
                else:
                    jobs.append((k, shown, self._request(state, shown)))
        replies = self.verifier.generate([job[2] for job in jobs])
        for (k, shown, _), reply in zip(jobs, replies, strict=True):
            text = reply.texts[0] if reply.texts and reply.error is None else ""
            choice = parse_usc_choice(text, len(shown))
            stats.tests_validated += 1
            if choice is None:
                stats.verdicts["invalid"] += 1
                stats.verdict_failures["error" if reply.error else "unreadable_selection"] += 1
                counts = vote_counts(states[k].assignment, states[k].num_answers)
                results[k] = no_reward(states[k], "invalid_selection", [float(c) for c in counts])
            else:
                stats.verdicts["selected"] += 1
                results[k] = self._select(states[k], shown[choice], "selected")
        for result in results:
            stats.statuses[result.status] += 1
        stats.extra["initial_ties"] = stats.statuses["tie"]
        return results, stats

    @staticmethod
    def _closed(state: GroupState, counts: list[int]) -> GroupResult:
        winners = leaders(counts)
        scores = [float(c) for c in counts]
        if len(winners) != 1:  # tie rule "none": D.1 rewards "the unique most frequent answer"
            return no_reward(state, "tie", scores)
        return make_result(state, rewards_for(state.assignment, winners), "voted", scores, state.answers[winners[0]])

    @staticmethod
    def _select(state: GroupState, rollout: int, status: str) -> GroupResult:
        chosen = state.group.completions[rollout].strip()
        verified = [1.0 if c.strip() == chosen else 0.0 for c in state.group.completions]
        counts = vote_counts(state.assignment, state.num_answers)
        answer = state.answers[state.assignment[rollout]]
        return make_result(state, verified, status, [float(c) for c in counts], answer)

    def _request(self, state: GroupState, shown: list[int]) -> Request:
        cap = self.max_response_chars
        responses = [state.group.completions[g] for g in shown]
        if cap:
            responses = [r if len(r) <= cap else "..." + r[-cap:] for r in responses]
        return Request(
            messages=usc_messages(group_question(state.group, self.question_fn), responses),
            sampling=Sampling(temperature=0.0, max_tokens=self.settings.validation_max_tokens),
            choices=tuple(str(k + 1) for k in range(len(shown))),
            stage="usc_selection",
        )
