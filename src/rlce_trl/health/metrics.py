"""What the monitor reads of each scored group, and the health metrics: pure functions of group summaries."""

from __future__ import annotations

import functools
import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..evidence.votes import majority, ranking, tally


# -- what the monitor reads ---------------------------------------------------------------------------------------
@dataclass
class GroupSummary:
    """One rollout group as the monitor sees it.

    Args:
        answers: each rollout's canonical answer (`None`: the rollout gave none).
        rewards: each rollout's task reward (`None`: the method gave the group no reward).
        verified_answer: the answer the method picked, if exactly one.
        verdicts: the verifier's verdicts on this group's evidence (`"yes"`, `"no"`, ...; `"none"` when abstained).
        closed: whether the task has a closed label set.
    """

    answers: list[str | None]
    rewards: list[float | None]
    verified_answer: str | None = None
    verdicts: Counter = field(default_factory=Counter)
    closed: bool = True

    @property
    def distinct(self) -> set[str]:
        return {a for a in self.answers if a is not None}

    @property
    def majority(self) -> str | None:
        """The answer most rollouts give, or `None` when there is none or several tie."""
        return majority(self.answers, tie="none")  # a tie has no majority for the verified answer to match


def summarize_group(group, result) -> GroupSummary:
    """A [`GroupSummary`] of a scored group (`rlce_trl.scoring.Group` and its `GroupResult`)."""
    answers = [None if a is None else result.answers[a] for a in result.assignment]
    verdicts = Counter()
    for test in result.tests or []:
        verdict = test.get("verdict") if isinstance(test, dict) else getattr(test, "verdict", None)
        if verdict is not None or getattr(test, "text", None) is not None:  # a built test; failed builds are skipped
            verdicts[str(verdict) if verdict is not None else "none"] += 1
    return GroupSummary(answers=answers, rewards=list(result.verified), verified_answer=result.verified_answer,
                        verdicts=verdicts, closed=bool(group.labels))


@dataclass
class StepRecord:
    """The groups of one generation batch, logged under `step`."""

    step: int
    groups: list[GroupSummary]
    #: the step's verdicts as the scorer counted them (`StepStats.verdicts`); `None`: those of the groups' tests
    verdicts: Counter | None = None

    def verdict_mix(self) -> Counter:
        return Counter(self.verdicts) if self.verdicts is not None else verdict_mix(self.groups)


# -- metrics: pure functions of group summaries --------------------------------------------------------------------
def _share(hits: int, total: int) -> float | None:
    return hits / total if total else None


def one_answer_share(groups: Sequence[GroupSummary]) -> float | None:
    """Share of groups in which every rollout gives the same answer (a rollout without an answer breaks unanimity;
    a group where no rollout answers is not unanimous)."""
    groups = [g for g in groups if g.answers]
    hits = sum(1 for g in groups if None not in g.answers and len(g.distinct) == 1)
    return _share(hits, len(groups))


def answered_share(groups: Sequence[GroupSummary]) -> float | None:
    """Share of rollouts that give an answer (one the task's extractor reads); `None` when there are no rollouts.
    A policy whose completions stop holding an answer (garbled or truncated text) drives it towards 0."""
    answers = [a for g in groups for a in g.answers]
    return _share(sum(a is not None for a in answers), len(answers))


def _spread(rewards: Sequence[float | None]) -> float:
    values = [r for r in rewards if r is not None and math.isfinite(r)]
    return max(values) - min(values) if values else 0.0


def zero_spread_share(groups: Sequence[GroupSummary]) -> float | None:
    """Share of groups whose task rewards do not vary (all equal, or no reward at all): no GRPO advantage."""
    groups = [g for g in groups if g.rewards]
    return _share(sum(1 for g in groups if _spread(g.rewards) == 0), len(groups))


def signal_share(groups: Sequence[GroupSummary]) -> float | None:
    """Share of groups with a usable comparison: two or more distinct answers and task rewards that differ."""
    groups = [g for g in groups if g.rewards]
    return _share(sum(1 for g in groups if len(g.distinct) >= 2 and _spread(g.rewards) > 0), len(groups))


def task_reward(groups: Sequence[GroupSummary]) -> float | None:
    """Mean task reward over the rollouts that got one."""
    values = [r for g in groups for r in g.rewards if r is not None and math.isfinite(r)]
    return sum(values) / len(values) if values else None


def answer_entropy(groups: Sequence[GroupSummary]) -> float | None:
    """Shannon entropy (bits) of the answers of all rollouts pooled across prompts (rollouts without an answer left
    out); `None` when none answers. A policy that answers the same label whatever the input drives it towards 0."""
    counts = Counter(a for g in groups for a in g.answers if a is not None)
    total = sum(counts.values())
    return -sum(c / total * math.log2(c / total) for c in counts.values()) + 0.0 if total else None


def near_duplicate_rate(groups: Sequence[GroupSummary], similarity: float = 0.8) -> float | None:
    """Free text: for every pair of groups (different prompts), the share of their rollout pairs whose answers are
    near-duplicates (word-set Jaccard similarity >= `similarity`, case-insensitive), averaged over the pairs of
    groups. `None` with fewer than two groups that answer."""
    bags = []
    for g in groups:
        counts = Counter(frozenset(a.lower().split()) for a in g.answers if a is not None)
        if counts:
            bags.append((counts, sum(counts.values())))
    if len(bags) < 2:
        return None

    @functools.cache
    def near(a, b) -> bool:  # Jaccard similarity; two empty answers are alike
        return (len(a & b) / len(a | b) if a or b else 1.0) >= similarity

    total, pairs = 0.0, list(itertools.combinations(bags, 2))
    for (ci, ni), (cj, nj) in pairs:
        total += sum(x * y for a, x in ci.items() for b, y in cj.items() if near(a, b)) / (ni * nj)
    return total / len(pairs)


def verdict_mix(groups: Sequence[GroupSummary]) -> Counter:
    """The verdicts of all groups, pooled."""
    out: Counter = Counter()
    for g in groups:
        out.update(g.verdicts)
    return out


def total_variation(p: Counter, q: Counter) -> float | None:
    """Total-variation distance between two count distributions (0: same mix, 1: disjoint); `None` if one is
    empty."""
    np_, nq = sum(p.values()), sum(q.values())
    if not np_ or not nq:
        return None
    return 0.5 * sum(abs(p[k] / np_ - q[k] / nq) for k in set(p) | set(q))


def verified_majority_counts(groups: Sequence[GroupSummary]) -> tuple[int, int]:
    """(agreeing, eligible): eligible groups have two or more distinct answers, a unique majority and a verified
    answer; they agree when the verified answer is the majority."""
    return pooled(verified_majority_by_split(groups))


def pooled(by_split: dict[tuple[int, int], tuple[int, int]]) -> tuple[int, int]:
    """(agreeing, eligible) over every vote split of [`verified_majority_by_split`]."""
    return sum(a for a, _ in by_split.values()), sum(e for _, e in by_split.values())


def vote_split(group: GroupSummary) -> tuple[int, int]:
    """(rollouts giving the majority answer, rollouts giving an answer): how lopsided the group's vote is."""
    counts = tally(group.answers)
    return ranking(counts)[0][1], sum(counts.values())


def verified_majority_by_split(groups: Sequence[GroupSummary]) -> dict[tuple[int, int], tuple[int, int]]:
    """[`verified_majority_counts`] per [`vote_split`]: a 3-1 majority is right more often than a 2-1-1 one, so a
    policy that learns (more lopsided votes) agrees with its vote more often without any entrenchment; comparing
    groups of the same split with each other separates the two."""
    out: dict[tuple[int, int], list[int]] = {}
    for g in groups:
        if len(g.distinct) < 2 or g.verified_answer is None or g.majority is None:
            continue
        counts = out.setdefault(vote_split(g), [0, 0])
        counts[0] += g.verified_answer == g.majority
        counts[1] += 1
    return {split: (agree, eligible) for split, (agree, eligible) in sorted(out.items())}
