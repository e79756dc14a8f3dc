"""Label-free reward baselines (paper appendix D) as group scorers.

Every scorer derives from [`~rlce_trl.scoring.ScorerBase`] and is built as `cls(verifier, settings, **kwargs)` by the
one registry, [`rlce_trl.methods`], which also lists them by name.
"""

from .judge import PolicyJudgeScorer
from .rubrics import RubricScorer, rubric_score
from .ttrl import TTRLScorer
from .usc import USCScorer


def __getattr__(name):  # the registry's names, kept here for old imports without a cycle
    if name in {"REWARD_METHODS", "build_scorer"}:
        from .. import methods

        return getattr(methods, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["PolicyJudgeScorer", "RubricScorer", "TTRLScorer", "USCScorer", "rubric_score"]
