"""Inference-time selection over a shared candidate pool ("sample once, select many"): greedy, majority, USC,
Policy-Judge, RLCE best-of-n, Elect, Elect-noframes and an oracle, with `rlce-trl sample` / `rlce-trl select` and a
Python API for serving code:

```python
from rlce_trl.selection import select_answer

choice = select_answer(["<think>...</think><keyframes>2</keyframes><answer>garden</answer>", ...], "elect",
                       labels=["garden", "garage"], num_frames=8, token_logprobs=[[...], ...])
choice.answer, choice.status
```
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..elect.election import ElectConfig
from .pool import PoolRow, parse_candidate, read_pool, row_from_record, sample_pool
from .protocol import budget_subsets, format_table, paired_bootstrap, select_rows, summarize
from .selectors import (
    ElectSelector,
    GreedySelector,
    MajoritySelector,
    OracleSelector,
    ScorerSelector,
    Selection,
    SingleSelector,
    majority_answer,
)

#: The selectors of their own (no group scorer): name -> class. Any other name is a group scorer of
#: `rlce_trl.methods` (a reward method, an alias or `package.module:Class`), built by
#: [`rlce_trl.methods.build_scorer`] as in training, and needs a verifier.
SELECTORS = {"greedy": GreedySelector, "single": SingleSelector, "majority": MajoritySelector,
             "oracle": OracleSelector, "elect": ElectSelector, "elect_noframes": ElectSelector}


def known_selectors() -> list[str]:
    """Every registered name [`make_selector`] takes (a `package.module:Class` scorer is taken too)."""
    from ..methods import REWARD_METHODS

    return [*SELECTORS, *REWARD_METHODS]


def selector_name_problem(name: str) -> str | None:
    """Why `name` names no selector (`None` when it does): one of [`SELECTORS`], else a reward method name, alias or
    `package.module:Class` (checked for its form; imported when the selector is built)."""
    from ..methods import method_name_problem

    if name in SELECTORS or method_name_problem(name) is None:
        return None
    return (f"Unknown selector {name!r}; choose from {', '.join(known_selectors())}, or a scorer as "
            "'package.module:Class'.")


def needs_verifier(name: str) -> bool:
    """Group-scorer selectors need the verifier (Elect only for its referee)."""
    return name not in SELECTORS


def make_selector(name: str, verifier=None, elect_config: ElectConfig | None = None, settings=None,
                  referee: bool = False, tokenizer=None, **options):
    """A selector by name: one of [`SELECTORS`] (`greedy`, `single`, `majority`, `oracle`, `elect`,
    `elect_noframes`), or a group scorer built by `rlce_trl.methods.build_scorer` (a reward method such as `rlce`,
    `usc`, `policy_judge`, an alias, or `package.module:Class`), which needs `verifier`."""
    if SELECTORS.get(name) is ElectSelector:  # the referee is the verifier
        cfg = dataclasses.replace(elect_config or ElectConfig(), use_frames=name == "elect")
        return ElectSelector(cfg, referee=verifier if referee else None, tokenizer=tokenizer, name=name)
    if name in SELECTORS:
        return SELECTORS[name]()
    problem = selector_name_problem(name)
    if problem:
        raise ValueError(problem)
    if verifier is None:
        raise ValueError(f"Selector {name!r} needs a verifier: pass --verifier_model_name_or_path (the base model).")
    return ScorerSelector(name, verifier, settings, **options)


def select_answer(candidates: Sequence[str], selector: str = "majority", *, prompt=None, labels=None,
                  token_logprobs: Sequence[Sequence[float]] | None = None, num_frames: int | None = None,
                  greedy: str | None = None, verifier=None, **options) -> Selection:
    """Select among `candidates` (response texts) for one prompt, with the selectors of `rlce-trl select`."""
    record = {"id": "0", "prompt": prompt if prompt is not None else "", "answer_options": list(labels or []),
              "num_frames": num_frames,
              "candidates": [{"text": t, "token_logprobs": (token_logprobs or [None] * len(candidates))[i]}
                             for i, t in enumerate(candidates)],
              "greedy": {"text": greedy} if greedy is not None else None}
    chosen = make_selector(selector, verifier, **options)
    (result,) = chosen.select([(row_from_record(record), list(range(len(candidates))))])
    return result


__all__ = [
    "ElectSelector", "GreedySelector", "MajoritySelector", "OracleSelector", "SELECTORS", "PoolRow", "ScorerSelector",
    "Selection", "SingleSelector", "budget_subsets", "format_table", "known_selectors", "majority_answer",
    "make_selector", "needs_verifier", "paired_bootstrap", "parse_candidate", "read_pool", "row_from_record",
    "sample_pool", "select_answer", "select_rows", "selector_name_problem", "summarize",
]
