"""Every reward method as a group scorer, and the one registry that names them ([`REWARD_METHODS`],
[`build_scorer`]): training, best-of-n selection and co-evolution all build their scorers here. Besides `rlce`
([`~rlce_trl.evidence.pipeline.EvidencePipeline`]): `ttrl`, `usc`, `judge`, `rubrics` (+ `common`,
`baseline_prompts`), the label-free baselines of appendix D.1-D.3; `rlac`, `visplay`, `video_zero`, `pseudo_label`
(+ `selfplay`, `bleu`, `lexicons`), the co-evolution phases' scorers and data builders (D.4-D.6), run by the drivers
of `rlce_trl.coevolution`.
"""

from .judge import PolicyJudgeScorer
from .registry import (
    METHOD_ALIASES,
    REWARD_METHODS,
    build_scorer,
    method_hook,
    method_name_problem,
    resolve_alias,
    scorer_name,
    takes_partner,
)
from .rubrics import RubricScorer, rubric_score
from .ttrl import TTRLScorer
from .usc import USCScorer

__all__ = [
    "METHOD_ALIASES",
    "REWARD_METHODS",
    "PolicyJudgeScorer",
    "RubricScorer",
    "TTRLScorer",
    "USCScorer",
    "build_scorer",
    "method_hook",
    "method_name_problem",
    "resolve_alias",
    "rubric_score",
    "scorer_name",
    "takes_partner",
]
