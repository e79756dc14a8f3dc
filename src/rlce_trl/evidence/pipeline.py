"""The evidence pipeline over a whole step: canonicalize → construct → validate → aggregate (→ tie-break) → reward.

All groups of a step move through the stages together, so each stage is ONE batched verifier call, whatever the
number of groups, answers and tests:

    groups ─► canonicalize ─► [equivalence, free text only] ─► distinct answers
           ─► construct    ─► [tests for every ordered pair, sampled]  ─► tests
           ─► validate     ─► [yes / no / unknown per test, greedy]   ─► verdicts
           ─► aggregate    ─► no clear winner? ─► [extra tests] ─► [validate] ─► winner or none
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from ..scoring import Group, GroupResult, ScorerBase, StepStats
from ..verifiers.base import Request, Sampling, Verifier
from . import aggregation, canonicalization, construction, validation
from .prompt_set import VerifierPrompts, load_prompts
from .reward import verified_rewards
from .state import MODES, EvidenceTest, GroupState

__all__ = ["EvidencePipeline", "EvidenceSettings", "EvidenceStepStats"]

logger = logging.getLogger(__name__)


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
    redaction: str = "answers"  # `validation.REDACTION_MODES`: the answers as written, or every label inflection
    answer_fallback: bool = True
    prompts: VerifierPrompts | None = None  # construction / validation text and few-shot examples; None: defaults

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"Unknown RLCE mode {self.mode!r}: use one of {', '.join(MODES)}.")
        if self.redaction not in validation.REDACTION_MODES:
            modes = ", ".join(validation.REDACTION_MODES)
            raise ValueError(f"Unknown redaction {self.redaction!r}: use one of {modes}.")


def settings_from_fields(fields) -> EvidenceSettings:
    """The pipeline settings that the `rlce_*` fields of a mapping describe (an `RLCEGRPOConfig`'s, or the plain
    settings of the reward object `rlce_trl.RLCEReward`); the one place these names map to the pipeline."""
    sampling = {k: fields[f"rlce_construction_{k}"] for k in ("temperature", "top_p", "top_k", "max_tokens")}
    plain = ("mode", "tests_per_direction", "tie_break_tests_per_direction", "validation_max_tokens",
             "equivalence_max_tokens", "redact_answers", "redaction", "answer_fallback")
    return EvidenceSettings(
        **{k: fields[f"rlce_{k}"] for k in plain},  # `rlce_<field>` is the field of that name
        construction_sampling=Sampling(**sampling),
        prompts=load_prompts(fields["rlce_prompts_file"]) if fields.get("rlce_prompts_file") else None,
    )


class EvidenceStepStats(StepStats):
    """[`StepStats`] with the RLCE rates. Counts in `extra`: `initial_ties` (groups tied before the extra round),
    `initial_no_winner` (groups with no scored answer before it, e.g. every test abstained), `extra_round_groups`,
    `equivalence_failures`, `static_lookups` / `static_cache_hits` (static mode: answer pairs of either round
    looked up / served from the store), `pointwise_all_rewarded` (pointwise: every answer won, so the group has
    no signal)."""

    def metrics(self) -> dict[str, float]:
        out = super().metrics()
        compared = sum(1 for k in self.distinct_answers if k >= 2)
        for verdict in ("yes", "no", "unknown", "invalid"):
            out.setdefault(f"verdict_{verdict}_frac", 0.0)
        out.update(
            tie_rate=self.extra["initial_ties"] / compared if compared else 0.0,
            unresolved_tie_rate=self.statuses["tie"] / compared if compared else 0.0,
            verified_fraction=self.statuses["verified"] / self.groups if self.groups else 0.0,
            verifier_failed_groups=float(self.statuses["verifier_failed"]),
            equivalence_failures=float(self.extra["equivalence_failures"]),
        )
        if self.extra["static_lookups"]:
            out["static_cache_hit_rate"] = self.extra["static_cache_hits"] / self.extra["static_lookups"]
        return out


class EvidencePipeline(ScorerBase):
    """Runs the RLCE verification for all groups of a step, one batched verifier call per stage; every stage
    (equivalence, construction, validation) shows the verifier the group's clips.

    Args:
        verifier: the frozen model (any [`~rlce_trl.verifiers.base.Verifier`]).
        settings: [`EvidenceSettings`].
        static_tests: the store of the *static* ablation, `{prompt key: {"favoured\\x1fagainst": [[test, verdict]]}}`:
            tests built the first time an ordered pair of answer classes of a prompt is seen, then reused with their
            verdicts. Plain JSON-able data, saved with checkpoints by the trainer.
        static_max_classes: static mode, free text: the answer classes of a prompt shown to the equivalence call, so
            that a paraphrase of an earlier answer reuses that answer's tests (the first ones seen are kept).
        static_tie_breaks: static mode: the extra round's tests (ties, or no answer scored) are stored per ordered
            pair too and reused with their verdicts, so every test of a prompt is fixed once built (`False`: they
            are sampled afresh at every visit, as before).
    """

    name = "rlce"

    def __init__(self, verifier: Verifier, settings: EvidenceSettings | None = None, static_tests: dict | None = None,
                 static_max_classes: int = 16, static_tie_breaks: bool = True):
        self.verifier = verifier
        self.settings = settings or EvidenceSettings()
        self.static_tests: dict[str, dict[str, list[list]]] = static_tests if static_tests is not None else {}
        #: Static mode: the answer classes of each prompt, in the order they were first seen.
        self.static_classes: dict[str, list[str]] = {}
        self.static_max_classes = static_max_classes
        self.static_tie_breaks = static_tie_breaks
        self._static_updates: list[dict] = []

    @property
    def _static(self) -> bool:
        return self.settings.mode == "static"

    # -- the step ---------------------------------------------------------------------------------------------------
    def score(self, groups: Sequence[Group]) -> tuple[list[GroupResult], StepStats]:
        with self.verifier.session():  # the stages read the same contexts: a backend may keep them between calls
            return self._score(groups)

    def _score(self, groups: Sequence[Group]) -> tuple[list[GroupResult], StepStats]:
        stats = EvidenceStepStats(groups=len(groups))
        states = [canonicalization.canonicalize_deterministic(g, self.settings.answer_fallback) for g in groups]
        self._canonicalize(states, stats)
        stats.distinct_answers = [s.num_answers for s in states]
        comparable = [s for s in states if s.num_answers >= 2]
        for s in states:
            if s.num_answers < 2:
                s.status = "no_answer" if s.num_answers == 0 else "single_answer"

        self._construct(comparable, stats)
        self._validate(comparable, stats)
        pointwise = self.settings.mode == "pointwise"
        for s in comparable:
            self._aggregate(s)
        # pointwise: several winners is the rule, not a tie
        stats.extra["initial_ties"] += sum(not pointwise and len(s.winners) > 1 for s in comparable)
        stats.extra["initial_no_winner"] += sum(not s.winners for s in comparable)

        # Section 3.2: "If there is no clear winner ... additional evidence tests for the unresolved comparisons":
        # a tie, and also a group with no scored answer at all (every test abstained).
        if not pointwise and self.settings.tie_break_tests_per_direction > 0:
            self._extra_round([s for s in comparable if self._unresolved(s)], stats)

        for s in comparable:
            if not pointwise and len(s.winners) > 1:  # still tied after the extra tests: no verification reward
                s.status, s.winners = "tie", []
            else:  # no winner: every test abstained, the extra ones too (pointwise: several may each win)
                s.status = "verified" if s.winners else "no_winner"
            if pointwise:
                stats.extra["pointwise_all_rewarded"] += len(s.winners) == s.num_answers
            if s.status != "verified" and s.failed_requests:  # no reward because the verifier failed, not the evidence
                s.status = "verifier_failed"
        for s in states:
            stats.statuses[s.status] += 1
            stats.extra["equivalence_failures"] += s.equivalence_failures
        return [self._result(s) for s in states], stats

    # -- stages -----------------------------------------------------------------------------------------------------
    def _canonicalize(self, states: list[GroupState], stats: StepStats) -> None:
        known = {id(s): self._known_classes(s) for s in states}
        todo = [s for s in states if s.group.labels is None and canonicalization.equivalence_pairs(s, known[id(s)])]
        requests = [canonicalization.equivalence_request(s, self.settings.equivalence_max_tokens, known[id(s)])
                    for s in todo]
        for state, reply in zip(todo, self.verifier.generate(requests), strict=True):
            state.failed_requests += reply.error is not None
            canonicalization.apply_equivalence(state, reply, known[id(state)])
        if self._static:
            for s in states:
                if s.num_answers >= 2 and s.group.labels is None:
                    self._static_record_classes(s)

    def _construct(self, states: list[GroupState], stats: StepStats) -> None:
        pointwise = self.settings.mode == "pointwise"
        pairs = [[(i, None) for i in range(s.num_answers)] if pointwise else construction.ordered_pairs(s.num_answers)
                 for s in states]
        self._run_construction(states, pairs, stats, tie_break=False)

    def _construction_jobs(
        self, state: GroupState, pairs: Sequence[tuple[int, int | None]], stats: StepStats, tie_break: bool
    ) -> list[tuple[GroupState, int, int | None, Request]]:
        """The construction requests of one group's ordered `pairs`; in static mode a stored pair's tests (of the
        extra round too, with `static_tie_breaks`) are reused with their verdicts instead of asked for."""
        n = self.settings.tie_break_tests_per_direction if tie_break else self.settings.tests_per_direction
        sampling, prompts = self.settings.construction_sampling, self.settings.prompts
        fixed = self._static and (self.static_tie_breaks or not tie_break)
        stored = self.static_tests.get(state.group.prompt_key, {})
        jobs = []
        for i, j in pairs:
            cached = None
            if fixed:
                stats.extra["static_lookups"] += 1
                cached = stored.get(self._static_key(state, i, j, tie_break))
            if cached is None:
                jobs.append((state, i, j, construction.construction_request(state, i, j, n, sampling, prompts)))
                continue
            stats.extra["static_cache_hits"] += 1
            # A cached abstention stays an abstention: static tests and their verdicts are fixed.
            state.tests.extend(
                EvidenceTest(i, j, text, verdict, None if verdict else "static_abstention", tie_break)
                for text, verdict in cached
            )
        return jobs

    def _run_construction(self, states: list[GroupState], pairs: list, stats: StepStats, tie_break: bool) -> None:
        """Build the tests of each group's ordered `pairs` (one list per state), one batched call for all groups."""
        jobs = []
        for state, state_pairs in zip(states, pairs, strict=True):
            jobs += self._construction_jobs(state, state_pairs, stats, tie_break)
        replies = self.verifier.generate([job[3] for job in jobs])
        for (state, favoured, against, _), reply in zip(jobs, replies, strict=True):
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
        max_tokens = self.settings.validation_max_tokens
        for s in states:
            for test in s.tests:
                if test.text is None or test.verdict is not None or test.failure is not None:
                    continue  # construction failed, or a cached static verdict
                labels, shown = s.group.labels, test.text
                if self.settings.redact_answers:
                    shown = validation.redact_answers(test.text, s.answers, labels, self.settings.redaction)
                jobs.append((s, test))
                requests.append(validation.validation_request(s.group.context, shown, max_tokens, labels,
                                                              self.settings.prompts, s.group.media))
        replies = self.verifier.generate(requests)
        for (state, test), reply in zip(jobs, replies, strict=True):
            state.failed_requests += reply.error is not None
            text, finish = (reply.texts[0], reply.finish_reasons[0]) if reply.texts else ("", "error")
            test.verdict, test.failure = validation.parse_verdict(text, "error" if reply.error else finish)
            test.choice_logprobs = getattr(reply, "choice_logprobs", None)  # backends that score the choices
            stats.tests_validated += 1
            stats.verdicts[test.verdict or "invalid"] += 1
            if test.failure:
                stats.verdict_failures[test.failure] += 1
                logger.debug("Unreadable verdict (%s), counted as abstention: %r", test.failure, text[:200])
            if self._static and (self.static_tie_breaks or not test.tie_break) and reply.error is None:
                self._static_store(state, test)

    def _aggregate(self, state: GroupState) -> None:
        if self.settings.mode == "pointwise":
            state.scores = aggregation.pointwise_scores(state.num_answers, state.tests)
            state.winners = aggregation.pointwise_winners(state.scores)
        else:
            state.scores = aggregation.verification_scores(state.num_answers, state.tests)
            state.winners = aggregation.select_verified(state.scores)

    @staticmethod
    def _unresolved(state: GroupState) -> list[tuple[int, int]]:
        """The comparisons left open: those among the tied answers, or every comparison when no answer has a score
        (every test abstained). None when the only reason is a verifier that failed on every request."""
        if len(state.winners) == 1 or all(t.failure == "error" for t in state.tests):
            return []
        return aggregation.unresolved_pairs(state.winners or range(state.num_answers))

    def _extra_round(self, groups: list[GroupState], stats: StepStats) -> None:
        """One more round of tests for the unresolved comparisons, then aggregate again (section 3.2)."""
        if not groups:
            return
        stats.extra["extra_round_groups"] += len(groups)
        self._run_construction(groups, [self._unresolved(s) for s in groups], stats, tie_break=True)
        self._validate(groups, stats)
        for s in groups:
            self._aggregate(s)

    # -- static ablation store --------------------------------------------------------------------------------------
    def _known_classes(self, state: GroupState) -> list[str]:
        """Static mode, free text: this prompt's answer classes; an answer equal to one by normal form is renamed to
        it here (no call), the others are compared with them in the equivalence call."""
        if not self._static or state.group.labels is not None:
            return []
        classes = self.static_classes.get(state.group.prompt_key, [])
        by_norm = {canonicalization.normalize_answer(c): c for c in classes}
        state.answers = [by_norm.get(canonicalization.normalize_answer(a), a) for a in state.answers]
        return classes[: self.static_max_classes]

    def _static_record_classes(self, state: GroupState) -> None:
        for answer in state.answers:
            if answer not in self.static_classes.get(state.group.prompt_key, []):
                self._static_update({"key": state.group.prompt_key, "class": answer})

    def _static_key(self, state: GroupState, i: int, j: int, tie_break: bool = False) -> str:
        """The store's key of an ordered answer pair; the extra round's tests of that pair under `<pair>\x1ftie`."""
        norm = canonicalization.normalize_answer
        return f"{norm(state.answers[i])}\x1f{norm(state.answers[j])}" + ("\x1ftie" if tie_break else "")

    def _static_store(self, state: GroupState, test: EvidenceTest) -> None:
        pair = self._static_key(state, test.favoured, test.against, test.tie_break)
        self._static_update({"key": state.group.prompt_key, "pair": pair, "test": [test.text, test.verdict]})

    def _static_update(self, update: dict) -> None:
        self.apply_state_updates([update])
        self._static_updates.append(update)

    # -- state across steps (static mode) ---------------------------------------------------------------------------
    def apply_state_updates(self, updates: list[dict]) -> None:
        """Add static tests and answer classes built elsewhere (another process scored the group)."""
        for update in updates:
            if "class" in update:
                classes = self.static_classes.setdefault(update["key"], [])
                if update["class"] not in classes:
                    classes.append(update["class"])
            else:
                self.static_tests.setdefault(update["key"], {}).setdefault(update["pair"], []).append(update["test"])

    def pop_state_updates(self) -> list[dict]:
        """The static tests and classes added since the last call, to share with other processes."""
        updates, self._static_updates = self._static_updates, []
        return updates

    def state_dict(self) -> dict:
        """What a checkpoint keeps: the static tests and answer classes (empty unless `mode == "static"`)."""
        return {"static_tests": self.static_tests, "static_classes": self.static_classes}

    def load_state_dict(self, state: dict) -> None:
        self.static_tests.update(state.get("static_tests", {}))
        for key, classes in state.get("static_classes", {}).items():
            self.apply_state_updates([{"key": key, "class": c} for c in classes])

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
