"""Elect training rewards (Elect paper §4.1 Eq. 6-12, weights and ranges from §5.1) as plain TRL reward functions:
`f(prompts, completions, **columns) -> list[float | None]`, usable with a stock `GRPOTrainer` and with
`RLCEGRPOTrainer`.

| name                        | value                                   | gated | weight |
|-----------------------------|-----------------------------------------|-------|--------|
| `elect_accuracy`  (Eq. 12)  | I_acc                                   | -     | 0.1    |
| `elect_format`    (Eq. 11)  | F(o): `<think>`, `<answer>`, `<keyframes>` all present and non-empty | no | 0.1 |
| `elect_frame_sensitive` (Eq. 7-8) | I_acc * F * clip((abs(K) - E)/(1 + abs(K)), 0, 1) | yes | 0.2 |
| `elect_think_transparency` (Eq. 9) | I_acc * sin^2(pi * L~), L clipped to [64, 1024] tokens | yes | 0.3 |
| `elect_anti_repetition` (Eq. 10) | -rho, n-gram repetition over `<think>` | no | 0.3 |

The gate I_acc: `gate="gold"` [paper] compares the answer with the `solution` column (`None` for rows without one);
`gate="rlce"` [ours, label-free] compares it with RLCE's verified answer of the rollout group, which
`RLCEGRPOTrainer` passes to reward functions as the `rlce_verified_answer` column (`None` for groups without a
verified answer: ties, a single answer, verifier failure); `gate="none"` sets I_acc = 1 and drops `elect_accuracy`.
A gated term is `None` where the gate is `None`, so TRL leaves it out. `elect_frame_sensitive` is `None` on rows
without a frame count (the `num_frames` column, else the frames of the prompt's video block): text rows have no
frames to cite.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..data.media import video_blocks
from ..data.prompts import completion_text
from ..evidence.answers import extract_answer, normalize_answer
from .parsing import frame_sensitive_score, parse_elect_output, repetition_ratio, think_length, transparency_score

logger = logging.getLogger(__name__)

PAPER_WEIGHTS = {"accuracy": 0.1, "format": 0.1, "frame_sensitive": 0.2, "think_transparency": 0.3,
                 "anti_repetition": 0.3}
GATES = ("gold", "rlce", "none")


@dataclass
class ElectRewardConfig:
    """Settings of the five rewards. `tokenizer` counts think tokens (L of Eq. 9); without one, whitespace words."""

    tokenizer: Any = None
    think_range: tuple[int, int] = (64, 1024)
    ngram: int = 3  # the paper's formula says U_3/T_3, its prose "5-grams"; the formula wins
    duplicates: str = "drop"
    non_integer: str = "ignore"
    gate: str = "gold"
    solution_column: str = "solution"
    num_frames_column: str = "num_frames"
    labels_column: str = "answer_options"

    def __post_init__(self):
        problems = []
        if self.gate not in GATES:
            problems.append(f"gate={self.gate!r}: use one of {GATES}")
        if self.duplicates not in ("drop", "invalid"):
            problems.append(f"duplicates={self.duplicates!r}: use 'drop' or 'invalid'")
        if self.non_integer not in ("ignore", "invalid"):
            problems.append(f"non_integer={self.non_integer!r}: use 'ignore' or 'invalid'")
        lo, hi = self.think_range
        if not 0 <= lo < hi:
            problems.append(f"think_range={self.think_range}: need 0 <= lo < hi")
        if self.ngram < 1:
            problems.append(f"ngram={self.ngram}: use 1 or more")
        if problems:
            raise ValueError("Invalid ElectRewardConfig:\n  - " + "\n  - ".join(problems))


def frames_in_prompt(prompt) -> int | None:
    """T of a video row: the frame count of the first `{"type": "video"}` block (its decoded frame list, else its
    metadata's `frames_indices`); `None` for text prompts."""
    if isinstance(prompt, str) or not prompt:
        return None
    for block in video_blocks([m for m in prompt if isinstance(m, dict)]):
        if isinstance(block.get("video"), (list, tuple)) and block["video"]:
            return len(block["video"])
        indices = (block.get("metadata") or {}).get("frames_indices")
        if indices:
            return len(indices)
    return None


def _column(kwargs: dict, name: str, n: int) -> list:
    values = kwargs.get(name)
    return list(values) if values is not None else [None] * n


class _ElectTerm:
    """One reward function; TRL names it by `__name__`."""

    def __init__(self, name: str, cfg: ElectRewardConfig, compute: Callable):
        self.__name__ = name
        self.cfg = cfg
        self._compute = compute

    def parses(self, prompts, completions, kwargs):
        n = len(completions)
        frames = _column(kwargs, self.cfg.num_frames_column, n)
        prompts = prompts or [None] * n
        frames = [t if t is not None else frames_in_prompt(p) for t, p in zip(frames, prompts, strict=True)]
        labels = _column(kwargs, self.cfg.labels_column, n)
        parses = [parse_elect_output(completion_text(c), int(t) if t is not None else None, lab or None,
                                     self.cfg.duplicates, self.cfg.non_integer)
                  for c, t, lab in zip(completions, frames, labels, strict=True)]
        return parses, frames

    def gates(self, parses, kwargs) -> list[float | None]:
        n, cfg = len(parses), self.cfg
        if cfg.gate == "none":
            return [1.0] * n
        if cfg.gate == "gold":
            refs = _column(kwargs, cfg.solution_column, n)
            labels = _column(kwargs, cfg.labels_column, n)
            refs = [None if r is None else (extract_answer(str(r), lab or None) or str(r))
                    for r, lab in zip(refs, labels, strict=True)]
        elif "rlce_verified_answer" not in kwargs:
            raise ValueError(f"{self.__name__} with gate='rlce' needs the `rlce_verified_answer` column, which "
                             "RLCEGRPOTrainer passes to reward functions. Use RLCEGRPOTrainer, or gate='gold' with a "
                             "solution column.")
        else:
            refs = list(kwargs["rlce_verified_answer"])
        return [None if ref is None
                else float(p.answer is not None and normalize_answer(p.answer) == normalize_answer(ref))
                for p, ref in zip(parses, refs, strict=True)]

    def __call__(self, prompts, completions, **kwargs) -> list[float | None]:
        parses, frames = self.parses(prompts, completions, kwargs)
        return self._compute(self, parses, frames, kwargs)


def _accuracy(term, parses, frames, kwargs):
    return term.gates(parses, kwargs)


def _format(term, parses, frames, kwargs):
    return [float(p.format_ok) for p in parses]


def _frame_sensitive(term, parses, frames, kwargs):
    gates = term.gates(parses, kwargs)
    return [None if g is None or t is None
            else g * float(p.format_ok) * frame_sensitive_score(len(p.keyframes), p.invalid)
            for p, t, g in zip(parses, frames, gates, strict=True)]


def _think_transparency(term, parses, frames, kwargs):
    gates, cfg = term.gates(parses, kwargs), term.cfg
    if cfg.tokenizer is None and not getattr(term, "_warned", False):
        logger.warning("elect_think_transparency: no tokenizer given, think length L is counted in words.")
        term._warned = True
    return [None if g is None else g * transparency_score(think_length(p.think, cfg.tokenizer), cfg.think_range)
            for p, g in zip(parses, gates, strict=True)]


def _anti_repetition(term, parses, frames, kwargs):
    return [-repetition_ratio(p.think, term.cfg.ngram) for p in parses]


def make_elect_reward_funcs(cfg: ElectRewardConfig | None = None, include_accuracy: bool | None = None):
    """The Elect reward functions and their paper weights, in the order accuracy, format, frame-sensitive,
    transparency, anti-repetition. `include_accuracy=False` drops `elect_accuracy` (with RLCEGRPOTrainer,
    `rlce_verified` already is the accuracy term: give it `rlce_verified_weight=0.1` and `rlce_format_weight=0`);
    by default it is dropped only for `gate="none"`. Weights sum to 1 with accuracy included (Eq. 6)."""
    cfg = cfg or ElectRewardConfig()
    if include_accuracy is None:
        include_accuracy = cfg.gate != "none"
    terms = [("accuracy", _accuracy)] if include_accuracy else []
    terms += [("format", _format), ("frame_sensitive", _frame_sensitive), ("think_transparency", _think_transparency),
              ("anti_repetition", _anti_repetition)]
    funcs = [_ElectTerm(f"elect_{name}", cfg, compute) for name, compute in terms]
    return funcs, [PAPER_WEIGHTS[name] for name, _ in terms]
