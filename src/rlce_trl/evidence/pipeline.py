"""The evidence pipeline over a whole step: canonicalize → construct → validate → aggregate (→ tie-break) → reward.

All groups of a step move through the stages together, so each stage is ONE batched verifier call, whatever the
number of groups, answers and tests:

    groups ─► canonicalize ─► [equivalence, free text only] ─► distinct answers
           ─► construct    ─► [tests for every ordered pair, sampled]  ─► tests
           ─► validate     ─► [yes / no / unknown per test, greedy]   ─► verdicts
           ─► aggregate    ─► ties? ─► [extra tests] ─► [validate]    ─► winner or none
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..verifiers.base import Request, Sampling, Verifier
from . import aggregation, canonicalization, construction, validation
from .prompt_set import VerifierPrompts
from .reward import verified_rewards
from .state import EvidenceTest, Group, GroupState

logger = logging.getLogger(__name__)

MODES = ("evolving", "static", "pointwise")


@dataclass(frozen=True)
class EvidenceSettings:
    """How tests are built and read. Defaults are the paper's (appendix C.1) for PrefEval / IntentQA."""

    mode: str = "evolving"
    tests_per_direction: int = 1
    tie_break_tests_per_direction: int = 1
    construction_sampling: Sampling = Sampling(temperature=1.0, top_p=0.95, top_k=20, max_tokens=128)
    validation_max_tokens: int = 16
    equivalence_max_tokens: int = 256
    redact_answers: bool = True
    answer_fallback: bool = True
    prompts: VerifierPrompts | None = None  # construction / validation text and few-shot examples; None: defaults

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"Unknown RLCE mode {self.mode!r}: use one of {', '.join(MODES)}.")


@dataclass
class StepStats:
    """What the pipeline did in one step, for logging."""

    groups: int = 0
    distinct_answers: list[int] = field(default_factory=list)
    tests_built: int = 0
    tests_validated: int = 0
    construction_failures: Counter = field(default_factory=Counter)
    verdicts: Counter = field(default_factory=Counter)  # yes / no / unknown / invalid
    verdict_failures: Counter = field(default_factory=Counter)  # reasons of the "invalid" ones
    statuses: Counter = field(default_factory=Counter)
    initial_ties: int = 0
    equivalence_failures: int = 0
    static_cache_hits: int = 0

    @classmethod
    def merge(cls, parts: list[StepStats]) -> StepStats:
        """The stats of one step over all processes."""
        total = cls()
        for part in parts:
            for name, value in vars(part).items():
                setattr(total, name, getattr(total, name) + value)  # ints add, lists and Counters concatenate
        return total

    def metrics(self) -> dict[str, float]:
        """Scalar metrics, named as the trainer logs them (under `rlce/`)."""
        compared = sum(1 for k in self.distinct_answers if k >= 2)
        judged = sum(self.verdicts.values())
        out = {
            "distinct_answers_mean": sum(self.distinct_answers) / max(len(self.distinct_answers), 1),
            "tests_built": float(self.tests_built),
            "tests_validated": float(self.tests_validated),
            "construction_failures": float(sum(self.construction_failures.values())),
            "tie_rate": self.initial_ties / compared if compared else 0.0,
            "unresolved_tie_rate": self.statuses["tie"] / compared if compared else 0.0,
            "verified_fraction": self.statuses["verified"] / self.groups if self.groups else 0.0,
            "verifier_failed_groups": float(self.statuses["verifier_failed"]),
            "equivalence_failures": float(self.equivalence_failures),
            "abstentions_invalid": float(self.verdicts["invalid"]),
        }
        for verdict in ("yes", "no", "unknown", "invalid"):
            out[f"verdict_{verdict}_frac"] = self.verdicts[verdict] / judged if judged else 0.0
        return out


@dataclass
class GroupResult:
    """What the reward needs from one group, plus what the completions table shows."""

    verified: list[float | None]
    status: str
    answers: list[str]
    scores: list[float | None]
    verified_answer: str | None
    assignment: list[int | None]
    tests: list[EvidenceTest]


class EvidencePipeline:
    """Runs the RLCE verification for all groups of a step, one batched verifier call per stage.

    Args:
        verifier: the frozen model (any [`~rlce_trl.verifiers.base.Verifier`]).
        settings: [`EvidenceSettings`].
        static_tests: the store of the *static* ablation, `{prompt key: {"favoured\\x1fagainst": [[test, verdict]]}}`:
            tests built the first time an ordered answer pair of a prompt is seen, then reused with their verdicts.
            Plain JSON-able data, saved with checkpoints by the trainer.
    """

    def __init__(self, verifier: Verifier, settings: EvidenceSettings | None = None, static_tests: dict | None = None):
        self.verifier = verifier
        self.settings = settings or EvidenceSettings()
        self.static_tests: dict[str, dict[str, list[list]]] = static_tests if static_tests is not None else {}
        self._static_updates: list[tuple[str, str, list]] = []

    # -- the step ---------------------------------------------------------------------------------------------------
    def score(self, groups: Sequence[Group]) -> tuple[list[GroupResult], StepStats]:
        stats = StepStats(groups=len(groups))
        states = [canonicalization.canonicalize_deterministic(g, self.settings.answer_fallback) for g in groups]
        self._canonicalize(states, stats)
        stats.distinct_answers = [s.num_answers for s in states]
        comparable = [s for s in states if s.num_answers >= 2]
        for s in states:
            if s.num_answers < 2:
                s.status = "no_answer" if s.num_answers == 0 else "single_answer"

        self._construct(comparable, stats)
        self._validate(comparable, stats)
        for s in comparable:
            self._aggregate(s)
            s.initial_tie = len(s.winners) > 1
        stats.initial_ties = sum(s.initial_tie for s in comparable)

        tied = [s for s in comparable if len(s.winners) > 1]
        if tied and self.settings.mode != "pointwise" and self.settings.tie_break_tests_per_direction > 0:
            self._break_ties(tied, stats)

        for s in comparable:
            if self.settings.mode == "pointwise":  # several answers may each win a majority of their tests
                s.status = "verified" if s.winners else "no_winner"
            elif len(s.winners) > 1:  # still tied after the extra tests: no verification reward
                s.status, s.winners = "tie", []
            else:  # no winner at all means every test abstained
                s.status = "verified" if s.winners else "no_winner"
            if s.status != "verified" and s.failed_requests:  # no reward because the verifier failed, not the evidence
                s.status = "verifier_failed"
        for s in states:
            stats.statuses[s.status] += 1
            stats.equivalence_failures += s.equivalence_failures
        return [self._result(s) for s in states], stats

    # -- stages -----------------------------------------------------------------------------------------------------
    def _canonicalize(self, states: list[GroupState], stats: StepStats) -> None:
        todo = [s for s in states if canonicalization.needs_equivalence(s)]
        requests = [canonicalization.equivalence_request(s, self.settings.equivalence_max_tokens) for s in todo]
        for state, reply in zip(todo, self.verifier.generate(requests)):
            state.failed_requests += reply.error is not None
            canonicalization.apply_equivalence(state, reply)

    def _construct(self, states: list[GroupState], stats: StepStats) -> None:
        settings = self.settings
        n = settings.tests_per_direction
        jobs: list[tuple[GroupState, int, int | None, Request]] = []
        for s in states:
            if settings.mode == "pointwise":
                for i in range(s.num_answers):
                    jobs.append((s, i, None, construction.pointwise_request(s, i, n, settings.construction_sampling)))
                continue
            for i, j in construction.ordered_pairs(s.num_answers):
                cached = self._static_lookup(s, i, j) if settings.mode == "static" else None
                if cached is not None:
                    stats.static_cache_hits += 1
                    # A cached abstention stays an abstention: static tests and their verdicts are fixed.
                    s.tests.extend(
                        EvidenceTest(i, j, text, verdict, failure=None if verdict else "static_abstention")
                        for text, verdict in cached
                    )
                else:
                    request = construction.pair_request(s, i, j, n, settings.construction_sampling, settings.prompts)
                    jobs.append((s, i, j, request))
        self._run_construction(jobs, stats, tie_break=False)

    def _run_construction(self, jobs: list, stats: StepStats, tie_break: bool) -> None:
        replies = self.verifier.generate([job[3] for job in jobs])
        for (state, favoured, against, _), reply in zip(jobs, replies):
            state.failed_requests += reply.error is not None
            for test in construction.tests_from_reply(reply, favoured, against, tie_break):
                state.tests.append(test)
                if test.text is None:
                    stats.construction_failures[test.failure] += 1
                else:
                    stats.tests_built += 1

    def _validate(self, states: list[GroupState], stats: StepStats) -> None:
        jobs: list[tuple[GroupState, EvidenceTest]] = []
        requests = []
        for s in states:
            for test in s.tests:
                if test.text is None or test.verdict is not None or test.failure is not None:
                    continue  # construction failed, or a cached static verdict
                shown = validation.redact_answers(test.text, s.answers) if self.settings.redact_answers else test.text
                jobs.append((s, test))
                requests.append(
                    validation.validation_request(
                        s.group.context, shown, self.settings.validation_max_tokens, self.settings.prompts
                    )
                )
        replies = self.verifier.generate(requests)
        for (state, test), reply in zip(jobs, replies):
            state.failed_requests += reply.error is not None
            text, finish = (reply.texts[0], reply.finish_reasons[0]) if reply.texts else ("", "error")
            test.verdict, test.failure = validation.parse_verdict(text, "error" if reply.error else finish)
            stats.tests_validated += 1
            stats.verdicts[test.verdict or "invalid"] += 1
            if test.failure:
                stats.verdict_failures[test.failure] += 1
                logger.debug("Unreadable verdict (%s), counted as abstention: %r", test.failure, text[:200])
            if self.settings.mode == "static" and not test.tie_break and reply.error is None:
                self._static_store(state, test)

    def _aggregate(self, state: GroupState) -> None:
        if self.settings.mode == "pointwise":
            state.scores = aggregation.pointwise_scores(state.num_answers, state.tests)
            state.winners = aggregation.pointwise_winners(state.scores)
        else:
            state.scores = aggregation.verification_scores(state.num_answers, state.tests)
            state.winners = aggregation.select_verified(state.scores)

    def _break_ties(self, tied: list[GroupState], stats: StepStats) -> None:
        """Ties: one more round of tests for the unresolved comparisons, then aggregate again (section 3.2)."""
        n = self.settings.tie_break_tests_per_direction
        sampling, prompts = self.settings.construction_sampling, self.settings.prompts
        jobs = [
            (s, i, j, construction.pair_request(s, i, j, n, sampling, prompts))
            for s in tied
            for i, j in aggregation.unresolved_pairs(s.winners)
        ]
        self._run_construction(jobs, stats, tie_break=True)
        self._validate(tied, stats)
        for s in tied:
            self._aggregate(s)

    # -- static ablation store --------------------------------------------------------------------------------------
    def _static_key(self, state: GroupState, i: int, j: int) -> str:
        norm = canonicalization.normalize_answer
        return f"{norm(state.answers[i])}\x1f{norm(state.answers[j])}"

    def _static_lookup(self, state: GroupState, i: int, j: int) -> list[list] | None:
        return self.static_tests.get(state.group.prompt_key, {}).get(self._static_key(state, i, j))

    def _static_store(self, state: GroupState, test: EvidenceTest) -> None:
        update = (state.group.prompt_key, self._static_key(state, test.favoured, test.against), [test.text, test.verdict])
        self.apply_state_updates([update])
        self._static_updates.append(update)

    # The trainer treats any group scorer with state across steps through these four methods.
    def apply_state_updates(self, updates: list[tuple[str, str, list]]) -> None:
        """Add static tests built elsewhere (another process scored the group)."""
        for prompt_key, pair_key, entry in updates:
            self.static_tests.setdefault(prompt_key, {}).setdefault(pair_key, []).append(entry)

    def pop_state_updates(self) -> list[tuple[str, str, list]]:
        """The static tests added since the last call, to share with other processes."""
        updates, self._static_updates = self._static_updates, []
        return updates

    def state_dict(self) -> dict:
        """What a checkpoint keeps: the static tests (empty unless `mode == "static"`)."""
        return {"static_tests": self.static_tests}

    def load_state_dict(self, state: dict) -> None:
        self.static_tests.update(state.get("static_tests", {}))

    # -- output -----------------------------------------------------------------------------------------------------
    @staticmethod
    def _result(state: GroupState) -> GroupResult:
        winner = state.answers[state.winners[0]] if len(state.winners) == 1 else None
        return GroupResult(
            verified=verified_rewards(state),
            status=state.status,
            answers=list(state.answers),
            scores=list(state.scores),
            verified_answer=winner,
            assignment=list(state.assignment),
            tests=list(state.tests),
        )


