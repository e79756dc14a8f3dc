"""Group scorers written the way a user would, outside the package, for the scorer-seam tests (`user_scorer:...`)."""

from __future__ import annotations

from rlce_trl.scoring import GroupResult, ScorerBase, StepStats


class ShortestWins:
    """A user's scorer with `score` only (no base class): the shortest completion of each group gets 1, no verifier
    call. `bonus` arrives through `reward_method_kwargs`."""

    name = "shortest"
    built: list[ShortestWins] = []

    def __init__(self, verifier, settings=None, bonus: float = 1.0):
        self.verifier, self.settings, self.bonus = verifier, settings, bonus
        self.calls = 0
        ShortestWins.built.append(self)

    def score(self, groups):
        self.calls += 1
        results = []
        for group in groups:
            lengths = [len(c) for c in group.completions]
            best = lengths.index(min(lengths))
            rewards = [self.bonus if g == best else 0.0 for g in range(len(lengths))]
            results.append(GroupResult(rewards, "scored", [], [], None, [None] * len(lengths)))
        stats = StepStats(groups=len(groups), distinct_answers=[0] * len(groups))
        stats.statuses["scored"] += len(groups)
        stats.extra["user_metric"] += 7
        return results, stats


class CenteredOnBatch(ScorerBase):
    """A scorer with a batch term: `finalize_batch` subtracts the mean reward of the WHOLE step from every reward."""

    def __init__(self, verifier=None, settings=None):
        self.batches: list[int] = []  # groups seen by each finalize_batch call

    def score(self, groups):
        results = [GroupResult([float(len(c) % 3) for c in g.completions], "scored", [], [], None,
                               [None] * len(g.completions)) for g in groups]
        return results, StepStats(groups=len(groups))

    def finalize_batch(self, groups, results):
        self.batches.append(len(groups))
        rewards = [r for result in results for r in result.verified]
        mean = sum(rewards) / len(rewards)
        for result in results:
            result.verified = [r - mean for r in result.verified]
        return results


def length_format(completions, **kwargs) -> list[float]:
    """A user's format term (a TRL reward function): 1 for a completion of at most 20 characters."""
    return [1.0 if len(c if isinstance(c, str) else c[-1]["content"]) <= 20 else 0.0 for c in completions]


class LabelMatch:
    """A user's scorer with `score` only (no base class) that reads a dataset column and brings its own format term:
    1 for a completion that contains the row's `pseudo_label`. Records the columns each group arrived with."""

    name = "labelmatch"
    columns = ("pseudo_label",)
    format_reward = staticmethod(length_format)

    def __init__(self):
        self.seen: list[dict | None] = []

    def score(self, groups):
        results = []
        for group in groups:
            self.seen.append(group.columns)
            label = (group.columns or {}).get("pseudo_label")
            rewards = [float(label is not None and label in c) for c in group.completions]
            results.append(GroupResult(rewards, "scored", [], [], None, [None] * len(rewards)))
        return results, StepStats(groups=len(groups))
