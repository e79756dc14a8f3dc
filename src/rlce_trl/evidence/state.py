"""The state one rollout group carries through the evidence pipeline.

Plain dataclasses, no behaviour beyond bookkeeping: every stage reads and extends a [`GroupState`]. [`Group`], the
input of every scorer, lives in the scorer seam (import it from `rlce_trl.scoring`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..scoring import Group  # the method-neutral group lives in the scorer seam

__all__ = ["MODES", "EvidenceTest", "GroupState"]

#: RLCE's test modes: the method (`evolving`) and its two ablations (section 4.3).
MODES = ("evolving", "static", "pointwise")


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
    equivalence_failures: int = 0
    failed_requests: int = 0  # verifier requests of this group that came back as errors (backend down, timeout)

    @property
    def num_answers(self) -> int:
        return len(self.answers)
