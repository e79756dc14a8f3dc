"""The one registry of reward methods: every group scorer is built as `cls(verifier, settings, **kwargs)`.

- `rlce`: RLCE; `settings.mode` picks evolving (default), static or pointwise tests. Calls: equivalence*,
  construction, validation (+ one extra round when there is no clear winner).
- `usc`: Universal Self-Consistency (D.1). No call (closed labels); one selection per group (free text).
- `policy_judge`: Policy LLM-Judge, pointwise Yes/No (D.2). One judgment per distinct answer.
- `ttrl`: TTRL majority-vote pseudo-label. No call.
- `rar`: Rubrics as Rewards, static seed rubrics (D.3). Seed (first visit), judge.
- `rler`: Evolving Rubrics of DR Tulu (D.3). Seed (first visit), generation, judge.
- `rlac_generator` / `rlac_critic`: RLAC's two phases (D.6; `rlce_trl.methods.rlac`, run by `rlce-trl coevolve`).
  Critic (partner; generator phase only), meta-verification (paraphrase checks only), validation.
- `visplay_questioner`: VisPlay's Questioner phase (D.4) against a frozen `partner`: one call (m answers each).
- `vz_questioner`: Video-Zero's Questioner phase (D.5) against a frozen `partner`: one call (m with clip, m blind).
- `visplay_reasoner` / `vz_solver`: the Reasoner's / Solver's pseudo-label rewards as group scorers (no call).

(* free text only.) `rlce_static` and `rlce_pointwise` are aliases of `rlce` with that mode (`RLCEGRPOConfig` turns
them into `rlce_mode`, its one knob for the ablation). A name of the form `package.module:Class` builds your own
scorer the same way: `Class(verifier, settings, **kwargs)`.

```python
from rlce_trl.methods import build_scorer

scorer = build_scorer("rler", verifier, settings, max_active=5)
results, stats = scorer.score(groups)
```
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import logging
import re
from collections.abc import Callable

from ..evidence.pipeline import EvidencePipeline, EvidenceSettings
from ..scoring import GroupScorer, as_group_scorer
from ..verifiers.base import Verifier
from .judge import PolicyJudgeScorer
from .pseudo_label import PseudoLabelScorer, VZSolverScorer
from .rlac import RLACCriticScorer, RLACGeneratorScorer
from .rubrics import RubricScorer
from .ttrl import TTRLScorer
from .usc import USCScorer
from .video_zero import VZQuestionerScorer
from .visplay import VisPlayQuestionerScorer

#: Reward methods by recipe name: `factory(verifier, settings, **kwargs) -> scorer`.
REWARD_METHODS: dict[str, Callable[..., GroupScorer]] = {
    "rlce": EvidencePipeline,
    "usc": USCScorer,
    "policy_judge": PolicyJudgeScorer,
    "ttrl": TTRLScorer,
    "rar": functools.partial(RubricScorer, evolving=False),
    "rler": functools.partial(RubricScorer, evolving=True),
    "rlac_generator": RLACGeneratorScorer,
    "rlac_critic": RLACCriticScorer,
    "visplay_questioner": VisPlayQuestionerScorer,
    "visplay_reasoner": PseudoLabelScorer,
    "vz_questioner": VZQuestionerScorer,
    "vz_solver": VZSolverScorer,
}
#: Documented aliases: `name -> (method, RLCE mode)`.
METHOD_ALIASES: dict[str, tuple[str, str]] = {
    "rlce_static": ("rlce", "static"),
    "rlce_pointwise": ("rlce", "pointwise"),
}

logger = logging.getLogger(__name__)

_DOTTED = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def method_name_problem(name: str) -> str | None:
    """Why `name` cannot name a reward method, or `None`. A dotted path is checked for its form only here; it is
    imported when the scorer is built."""
    if name in REWARD_METHODS or name in METHOD_ALIASES or _DOTTED.match(name):
        return None
    return (
        f"reward_method={name!r}: use one of {', '.join([*REWARD_METHODS, *METHOD_ALIASES])}, or your own scorer "
        "as 'package.module:Class'."
    )


def resolve_alias(name: str) -> tuple[str, str | None]:
    """`(method, mode)`: `rlce_static` -> `("rlce", "static")`; any other name -> `(name, None)`."""
    return METHOD_ALIASES.get(name, (name, None))


def _factory(method: str) -> Callable[..., object]:
    """The registered factory of `method`, else the attribute its `package.module:Class` path names."""
    if method in REWARD_METHODS:
        return REWARD_METHODS[method]
    module_name, _, attr = method.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(
            f"reward_method={method!r}: cannot import {module_name!r} ({error}); is it on PYTHONPATH?"
        ) from None
    if not hasattr(module, attr):
        raise ValueError(f"reward_method={method!r}: module {module_name!r} has no attribute {attr!r}.")
    return getattr(module, attr)


def scorer_name(name: str) -> str:
    """The name a method's rewards and metrics are logged under: `rlce` for RLCE and its aliases, the registry name
    of a baseline, or the `name` attribute of your own scorer class (its class name by default)."""
    method, _ = resolve_alias(name)
    if method in REWARD_METHODS or method_name_problem(method):
        return method
    factory = _factory(method)
    return getattr(factory, "name", "") or getattr(factory, "__name__", method).lower()


def method_hook(name: str, hook: str) -> Callable[..., object] | None:
    """A class-level hook of method `name`'s scorer, or `None`: `format_reward` (a TRL reward function that replaces
    RLCE's `\\boxed{}` format term) or `policy_rows` (rewrites the training rows' prompts); the rubric baselines
    define both (D.3)."""
    method, _ = resolve_alias(name)
    if method not in REWARD_METHODS and not _DOTTED.match(method):
        return None
    factory = _factory(method)
    return getattr(getattr(factory, "func", factory), hook, None)  # a functools.partial names its class in `func`


def takes_partner(factory: Callable[..., object]) -> bool:
    """Whether a scorer factory has a `partner` parameter (the co-evolution phases' frozen opponent)."""
    try:
        return "partner" in inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin or C callable: no signature to read
        return False


def build_scorer(name: str, verifier: Verifier, settings: EvidenceSettings | None = None, *,
                 partner: Verifier | None = None, **kwargs) -> GroupScorer:
    """The group scorer of reward method `name`: a key of [`REWARD_METHODS`], an alias of [`METHOD_ALIASES`], or
    `package.module:Class`; built as `factory(verifier, settings, **kwargs)`, plus `partner=partner` when a partner
    model is given and the factory has a `partner` parameter (scorers without one are not passed it)."""
    problem = method_name_problem(name)
    if problem:
        raise ValueError(problem)
    method, mode = resolve_alias(name)
    settings = settings or EvidenceSettings()
    if mode is not None:
        settings = dataclasses.replace(settings, mode=mode)
    factory = _factory(method)
    if partner is not None:
        if takes_partner(factory):
            kwargs = {**kwargs, "partner": partner}
        else:
            logger.warning("reward_method=%r takes no partner model: the configured partner is not used.", name)
    try:
        scorer = factory(verifier, settings, **kwargs)
    except TypeError as error:
        shown = {k: v for k, v in kwargs.items() if k != "partner"}
        raise TypeError(f"reward_method={name!r} with reward_method_kwargs={shown}: {error}") from None
    return as_group_scorer(scorer)
