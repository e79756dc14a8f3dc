"""The state one rollout group carries through the evidence pipeline.

Plain dataclasses, no behaviour beyond bookkeeping: every stage reads and extends a [`GroupState`].
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


@dataclass
class Group:
    """One prompt's rollout group, as the pipeline receives it.

    Args:
        context: the sample context `c` and question `q` rendered as text (`prompts.render_context`).
        completions: the G rollout texts.
        labels: the answer space of a closed-label task, or `None` for free text.
        question: the question alone, for roles that must not see the context (USC's selector); optional.
        key: identity of the prompt across steps (static tests are cached under it); defaults to a hash of the
            context.
        media: the sample's clips (`Request.media`), shown to the verifier by every stage; `None` for text.
    """

    context: str
    completions: list[str]
    labels: tuple[str, ...] | None = None
    key: str | None = None
    question: str | None = None
    media: list[dict] | None = None

    @property
    def prompt_key(self) -> str:
        return self.key if self.key is not None else hashlib.sha1(self.context.encode()).hexdigest()


@dataclass
class EvidenceTest:
    """One evidence test. Pairwise: supports answer `favoured` over answer `against` (a supporting test of the first,
    a contradicting test of the second). Pointwise: `against is None`.

    `text is None` when construction failed; `verdict` is "yes" / "no" / "unknown", or `None` while not validated or
    when the validator's reply could not be read (an abstention, with the reason in `failure`)."""

    favoured: int
    against: int | None
    text: str | None
    verdict: str | None = None
    failure: str | None = None
    tie_break: bool = False
    choice_logprobs: dict[str, float] | None = None  # per-choice log-probabilities of the verdict, when returned

    @property
    def outcome(self) -> int | None:
        """z(t) of Eq. 2: 1 satisfied, 0 not satisfied, None abstained (unknown, unreadable or never validated)."""
        return {"yes": 1, "no": 0}.get(self.verdict)


@dataclass
class GroupState:
    """A group on its way through the stages.

    `answers` are the distinct canonical answers; `assignment[g]` is the index in `answers` of rollout g, or `None`
    when no answer could be extracted from it (it can never be the verified answer)."""

    group: Group
    answers: list[str] = field(default_factory=list)
    assignment: list[int | None] = field(default_factory=list)
    tests: list[EvidenceTest] = field(default_factory=list)
    scores: list[float | None] = field(default_factory=list)
    winners: list[int] = field(default_factory=list)
    status: str = "pending"
    initial_tie: bool = False
    equivalence_failures: int = 0
    merged_by_verifier: int = 0
    failed_requests: int = 0  # verifier requests of this group that came back as errors (backend down, timeout)

    @property
    def num_answers(self) -> int:
        return len(self.answers)
