"""Label-free reward methods as group scorers (paper appendix D), chosen by name.

Every scorer has the interface of [`~rlce_trl.evidence.pipeline.EvidencePipeline`]:
`score(groups) -> (list[GroupResult], StepStats)`, where `GroupResult.verified` is the per-rollout task reward
(`None` for the whole group when the method gives no reward) and every stage of a step is ONE batched
`verifier.generate` call. Stateful scorers (static RLCE tests, rubric buffers) also have `pop_state_updates`,
`apply_state_updates`, `state_dict` and `load_state_dict`.

| name             | method                                              | verifier calls per step                  |
|------------------|-----------------------------------------------------|------------------------------------------|
| `rlce`           | RLCE, evolving comparative evidence tests           | equivalence*, construction, validation (+ tie-break round) |
| `rlce_static`    | RLCE ablation: tests built once per prompt and pair | as `rlce`, cached pairs skip both        |
| `rlce_pointwise` | RLCE ablation: tests per answer, majority satisfied | equivalence*, construction, validation   |
| `usc`            | Universal Self-Consistency (D.1)                    | none (closed labels); one selection per group (free text) |
| `policy_judge`   | Policy LLM-Judge, pointwise Yes/No (D.2)            | one judgment per distinct answer         |
| `ttrl`           | TTRL majority-vote pseudo-label                     | none                                     |
| `rar`            | Rubrics as Rewards, static seed rubrics (D.3)       | seed (first visit), judge                |
| `rler`           | Evolving Rubrics of DR Tulu (D.3)                   | seed (first visit), generation, judge    |

(* free text only.) Example:

```python
from rlce_trl.baselines import build_scorer

scorer = build_scorer("rler", verifier, settings, max_active=5)
results, stats = scorer.score(groups)
```
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..evidence.pipeline import EvidencePipeline, EvidenceSettings
from ..verifiers.base import Verifier
from .judge import PolicyJudgeScorer
from .rubrics import RubricScorer, rubric_score
from .ttrl import TTRLScorer
from .usc import USCScorer


def _rlce(mode: str | None):
    def factory(verifier: Verifier, settings: EvidenceSettings | None = None, **options) -> EvidencePipeline:
        settings = settings or EvidenceSettings()
        if mode is not None:
            settings = dataclasses.replace(settings, mode=mode)
        return EvidencePipeline(verifier, settings, **options)

    return factory


def _usc(verifier: Verifier, settings: EvidenceSettings | None = None, **options) -> USCScorer:
    return USCScorer(verifier, settings, **options)


def _policy_judge(verifier: Verifier, settings: EvidenceSettings | None = None, **options) -> PolicyJudgeScorer:
    return PolicyJudgeScorer(verifier, settings, **options)


def _ttrl(verifier: Verifier, settings: EvidenceSettings | None = None, **options) -> TTRLScorer:
    options.setdefault("answer_fallback", settings.answer_fallback if settings else True)
    return TTRLScorer(verifier, **options)


def _rar(verifier: Verifier, settings: EvidenceSettings | None = None, **options) -> RubricScorer:
    return RubricScorer(verifier, settings, evolving=False, **options)


def _rler(verifier: Verifier, settings: EvidenceSettings | None = None, **options) -> RubricScorer:
    return RubricScorer(verifier, settings, evolving=True, **options)


#: Reward methods by recipe name: `factory(verifier, settings, **options) -> scorer`. `rlce` keeps the mode of the
#: settings; `rlce_static` / `rlce_pointwise` force the ablation's mode.
REWARD_METHODS: dict[str, Callable[..., object]] = {
    "rlce": _rlce(None),
    "rlce_static": _rlce("static"),
    "rlce_pointwise": _rlce("pointwise"),
    "usc": _usc,
    "policy_judge": _policy_judge,
    "ttrl": _ttrl,
    "rar": _rar,
    "rler": _rler,
}


def build_scorer(name: str, verifier: Verifier, settings: EvidenceSettings | None = None, **options):
    """The group scorer of reward method `name` (a key of [`REWARD_METHODS`])."""
    if name not in REWARD_METHODS:
        raise ValueError(f"Unknown reward method {name!r}: use one of {', '.join(REWARD_METHODS)}.")
    return REWARD_METHODS[name](verifier, settings, **options)


__all__ = [
    "REWARD_METHODS",
    "PolicyJudgeScorer",
    "RubricScorer",
    "TTRLScorer",
    "USCScorer",
    "build_scorer",
    "rubric_score",
]
