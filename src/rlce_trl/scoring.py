"""The seam between the trainer and every reward method: a group scorer.

A *group scorer* turns whole rollout groups into per-rollout task rewards, one batched verifier call per stage:

    results, stats = scorer.score(groups)        # list[Group] -> list[GroupResult], StepStats

The trainer gathers the groups of a step from every process, scores each group once, gathers the results, runs
`finalize_batch` once on the whole batch on every process, and hands each process its slice. Scorers with state
across steps (RLCE's static tests, rubric buffers) share it through `pop_state_updates` / `apply_state_updates` and
checkpoint it through `state_dict` / `load_state_dict`.

- [`GroupScorer`]: the protocol the trainer calls; your own scorer derives from [`ScorerBase`], or defines `score`
  and any of the other members only ([`as_group_scorer`]): the trainer never probes a scorer for members.
- [`Group`], [`GroupResult`], [`StepStats`]: what goes in and comes out, with no method's specifics (those go in
  `GroupResult.tests` / `GroupResult.extra` and `StepStats.extra`).

Nothing here imports torch or any method.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class Group:
    """One prompt's rollout group, as a scorer receives it.

    Args:
        context: the sample context `c` and question `q` rendered as text (`evidence.prompts.render_context`).
        completions: the G rollout texts.
        labels: the answer space of a closed-label task, or `None` for free text.
        key: identity of the prompt across steps (state such as static tests is kept under it); defaults to a hash
            of the context.
        question: the question alone, for roles that must not see the context (USC's selector); optional.
        media: the sample's clips (`Request.media`), shown to the verifier by every stage; `None` for text.
        columns: the row's dataset columns named in the scorer's `columns` attribute (e.g. the response a critic
            phase attacks, a pseudo-label); `None` when the scorer names none.
    """

    context: str
    completions: list[str]
    labels: tuple[str, ...] | None = None
    key: str | None = None
    question: str | None = None
    media: list[dict] | None = None
    columns: dict[str, Any] | None = None

    @property
    def prompt_key(self) -> str:
        return self.key if self.key is not None else hashlib.sha1(self.context.encode()).hexdigest()


@dataclass
class GroupResult:
    """One group's outcome.

    Args:
        verified: the task reward of each rollout, or `None` for every rollout when the method gives the group no
            reward (TRL then counts it as 0 in the weighted sum, and the group has no task signal).
        status: the method's name for the outcome (`"verified"`, `"tie"`, `"voted"`, ...), counted per step.
        answers: the distinct answers the method compared.
        scores: one score per distinct answer (`None`: no score).
        verified_answer: the answer the method picked, if exactly one.
        assignment: per rollout, the index of its answer in `answers`, or `None` (no answer).
        tests: the method's evidence items, for logs and audits (RLCE: its `EvidenceTest`s).
        extra: anything else the method wants to keep with the group.
    """

    verified: list[float | None]
    status: str
    answers: list[str]
    scores: list[float | None]
    verified_answer: str | None
    assignment: list[int | None]
    tests: list = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepStats:
    """What a scorer did in one step, for logging; summed over processes with [`StepStats.merge`].

    Args:
        groups: groups scored.
        distinct_answers: the number of distinct answers of each group.
        statuses: count of each `GroupResult.status`.
        tests_built: evidence items the verifier wrote (RLCE tests, rubrics).
        tests_validated: judgments the verifier made (verdicts, rubric scores, selections).
        verdicts: the outcome of each judgment (`"yes"`, `"score_2"`, ...; `"invalid"` when unreadable).
        verdict_failures: unreadable judgments, by reason.
        construction_failures: evidence items the verifier failed to write, by reason.
        extra: method-specific counts (RLCE: `initial_ties`, `static_cache_hits`, ...), each logged as a metric.
    """

    groups: int = 0
    distinct_answers: list[int] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)
    tests_built: int = 0
    tests_validated: int = 0
    verdicts: Counter = field(default_factory=Counter)
    verdict_failures: Counter = field(default_factory=Counter)
    construction_failures: Counter = field(default_factory=Counter)
    extra: Counter = field(default_factory=Counter)

    @classmethod
    def merge(cls, parts: Sequence[StepStats]) -> StepStats:
        """The stats of one step over all processes (of the class of the first part)."""
        total = type(parts[0])() if parts else cls()
        for part in parts:
            for name, value in vars(part).items():
                setattr(total, name, getattr(total, name) + value)  # ints add, lists and Counters concatenate
        return total

    def metrics(self) -> dict[str, float]:
        """Scalar metrics; the trainer logs them under `<method name>/`."""
        judged = sum(self.verdicts.values())
        out = {
            "distinct_answers_mean": sum(self.distinct_answers) / max(len(self.distinct_answers), 1),
            "tests_built": float(self.tests_built),
            "tests_validated": float(self.tests_validated),
            "construction_failures": float(sum(self.construction_failures.values())),
            "abstentions_invalid": float(self.verdicts["invalid"]),
        }
        verdicts = {f"verdict_{v}_frac": self.verdicts[v] / judged if judged else 0.0 for v in sorted(self.verdicts)}
        return out | verdicts | {name: float(value) for name, value in sorted(self.extra.items())}


@runtime_checkable
class GroupScorer(Protocol):
    """What the trainer, the training scripts and the evidence trail call. Every stage of `score` should be ONE
    batched `verifier.generate` call. [`ScorerBase`] gives every member but `score` the default written here."""

    #: Metric prefix and reward-function name in the trainer's logs.
    name: str
    #: Dataset columns the trainer copies into `Group.columns` (gathered with the group).
    columns: tuple[str, ...]
    #: A TRL reward function that replaces RLCE's `\boxed{}` format term (the rubric baselines' answer tag plus
    #: justification, D.3), or `None` for RLCE's.
    format_reward: Callable[..., list[float | None]] | None
    #: `(rows, labels_column) -> rows`: rewrites the training rows' prompts (applied by the training scripts), or
    #: `None` to keep them.
    policy_rows: Callable[[list[dict], str], list[dict]] | None

    def score(self, groups: Sequence[Group]) -> tuple[list[GroupResult], StepStats]:
        """Score whole groups: one `GroupResult` per group, in order, and the step's stats."""
        raise NotImplementedError

    def finalize_batch(self, groups: Sequence[Group], results: list[GroupResult]) -> list[GroupResult]:
        """Once per step, on every process, over ALL groups of the step after the gather: a term that needs the
        whole batch (a diversity penalty). Must be deterministic, cheap and make no verifier call."""
        return results

    def pop_state_updates(self) -> list:
        """State built since the last call (JSON-able), to share with the other processes."""
        return []

    def apply_state_updates(self, updates: list) -> None:
        """Merge state another process built."""

    def state_dict(self) -> dict:
        """What a checkpoint keeps (JSON-able)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restore a checkpoint's state."""

    def record_details(self, group: Group) -> dict | None:
        """What the scorer keeps for the group's prompt, for the group's evidence record (`extra`; the rubrics of
        RaR / RLER), or `None`."""


#: The members of [`GroupScorer`] besides `name` and `score`: [`ScorerBase`] defines each, and the adapter of
#: [`as_group_scorer`] forwards each one a wrapped scorer defines.
HOOKS = ("columns", "format_reward", "policy_rows", "finalize_batch", "pop_state_updates", "apply_state_updates",
         "state_dict", "load_state_dict", "record_details")


class ScorerBase(GroupScorer):
    """Base of group scorers: `score` to implement; a default for every other member of [`GroupScorer`] (a scorer
    without state across steps needs nothing else). Stateful scorers override the four state methods."""

    name: str = ""  # the class name, lower-cased (`__init_subclass__`)
    columns: tuple[str, ...] = ()
    format_reward: Callable[..., list[float | None]] | None = None
    policy_rows: Callable[[list[dict], str], list[dict]] | None = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("name"):
            cls.name = cls.__name__.lower()


class _Adapted(ScorerBase):
    """A scorer that lacks part of [`GroupScorer`] (`score` only, the form a user writes first): every member it
    defines is its own, the defaults of `ScorerBase` fill the rest."""

    def __init__(self, inner):
        self.inner, self.score = inner, inner.score
        self.name = getattr(inner, "name", "") or type(inner).__name__.lower()
        for hook in HOOKS:
            value = getattr(inner, hook, None)
            if value is not None:
                setattr(self, hook, tuple(value) if hook == "columns" else value)


def as_group_scorer(scorer) -> GroupScorer:
    """`scorer` itself when it has the whole [`GroupScorer`] interface, else wrapped: what it defines is forwarded,
    the defaults of [`ScorerBase`] fill the rest. A `TypeError` naming the fix when it has no `score`."""
    if isinstance(scorer, GroupScorer):
        return scorer
    if not callable(getattr(scorer, "score", None)):
        raise TypeError(
            f"{type(scorer).__name__} is not a group scorer: it needs a method `score(groups) -> (list[GroupResult], "
            "StepStats)`; derive it from rlce_trl.scoring.ScorerBase."
        )
    return _Adapted(scorer)
