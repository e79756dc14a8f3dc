"""Parse an Elect-formatted output (Elect paper §4.1, Eq. 7, 10, 14): the `<think>`, `<answer>` and `<keyframes>`
fields, the cited frame set K(o), the invalid-index count E(o), and the per-output scores s_fs, tau and rho.

Pure Python. The paper fixes the three mandatory tags, K(o) subset of {1..T} (so indices are 1-based), "deduplication
and range checks", the think-length range [64, 1024] and the n-gram repetition ratio; it is silent on tag order, the
separator, and text outside the tags. Our choices (CHANGELOG "Decisions"): any tag order, comma/whitespace/semicolon
separators, a missing or empty tag makes the format invalid, duplicates dropped, non-integers ignored.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..evidence.answers import extract_answer, normalize_answer, tag_content

ELECT_SYSTEM_PROMPT = (
    "Think inside <think></think>, citing frames by number; list the frame numbers you relied on, comma-separated, "
    "inside <keyframes></keyframes>; give the final answer inside <answer></answer>."
)
TAGS = ("think", "answer", "keyframes")
_INT = re.compile(r"^[+-]?\d+$")


def frames_line(num_frames: int, unit: str = "frames") -> str:
    """The per-row line that tells the policy the index range: 'The video has 8 frames, numbered 1 to 8.'"""
    return f"The input has {num_frames} {unit}, numbered 1 to {num_frames}."


@dataclass(frozen=True)
class ElectParse:
    """phi(o) of Eq. 14, minus the confidence: answer, K, E, think text and the schema indicator F(o)."""

    answer: str | None
    raw_answer: str | None
    keyframes: frozenset[int]
    invalid: int
    think: str | None
    format_ok: bool
    has_keyframes: bool


def parse_keyframes(content: str | None, num_frames: int | None, duplicates: str = "drop",
                    non_integer: str = "ignore") -> tuple[frozenset[int], int]:
    """K(o) and E(o) from the `<keyframes>` content. Without `num_frames` (T unknown) every index >= 1 is valid."""
    if not content:
        return frozenset(), 0
    valid: list[int] = []
    invalid = 0
    for token in re.split(r"[\s,;]+", content.strip("[](){} ")):
        token = token.strip("[](){}.")
        if not token:
            continue
        if not _INT.match(token):
            invalid += non_integer == "invalid"
            continue
        index = int(token)
        if index < 1 or (num_frames is not None and index > num_frames):
            invalid += 1
        elif index in valid:
            invalid += duplicates == "invalid"
        else:
            valid.append(index)
    return frozenset(valid), invalid


def parse_elect_output(text: str, num_frames: int | None = None, labels: Sequence[str] | None = None,
                       duplicates: str = "drop", non_integer: str = "ignore") -> ElectParse:
    """Parse one output. `answer` is the canonical answer read from `<answer>` (a `\\boxed{}` inside is allowed;
    closed labels are matched by normal form); without `<answer>` it falls back to the whole-text extraction of
    RLCE (`extract_answer`), so a schema-less output still votes (paper: "fall back to answer-level aggregation")."""
    text = text or ""
    contents = {tag: tag_content(text, tag) for tag in TAGS}
    format_ok = all(contents[tag] for tag in TAGS)
    raw = contents["answer"]
    answer = extract_answer(raw, labels) if raw else extract_answer(text, labels)
    if answer is not None and not labels:
        answer = normalize_answer(answer) or None
    frames, invalid = parse_keyframes(contents["keyframes"], num_frames, duplicates, non_integer)
    return ElectParse(answer, raw, frames, invalid, contents["think"], format_ok, contents["keyframes"] is not None)


# -- the per-output scores shared by training (Eq. 7-10) and inference (Eq. 15-16) ----------------------------------
def frame_sensitive_score(num_valid: int, num_invalid: int) -> float:
    """s_fs = clip((|K| - E) / (1 + |K|), 0, 1) (Eq. 7)."""
    return min(1.0, max(0.0, (num_valid - num_invalid) / (1 + num_valid)))


def transparency_score(length: float, think_range: tuple[int, int] = (64, 1024)) -> float:
    """tau = sin^2(pi * L~), L~ = (clip(L, lo, hi) - lo) / (hi - lo) (Eq. 9, 15; range from §5.1)."""
    lo, hi = think_range
    scaled = (min(max(length, lo), hi) - lo) / (hi - lo)
    return math.sin(math.pi * scaled) ** 2


def repetition_ratio(text: str | None, n: int = 3) -> float:
    """rho = 1 - |U_n| / T_n over whitespace words, 0 when there is no n-gram (Eq. 10)."""
    words = (text or "").split()
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return 1.0 - len(set(grams)) / len(grams) if grams else 0.0


def think_length(think: str | None, tokenizer=None) -> int:
    """L(o): tokens of the `<think>` text under `tokenizer` (without special tokens), else whitespace words."""
    if not think:
        return 0
    if tokenizer is None:
        return len(think.split())
    return len(tokenizer(think, add_special_tokens=False)["input_ids"])


def tail_confidence(token_logprobs: Sequence[float] | None, fraction: float = 0.25) -> float | None:
    """c_i: arithmetic mean of exp(logprob) over the last ceil(fraction * len) sampled tokens (§5.1); `None` when no
    log-probabilities are known."""
    if not token_logprobs:
        return None
    tail = list(token_logprobs)[-max(1, math.ceil(fraction * len(token_logprobs))) :]
    return sum(math.exp(lp) for lp in tail) / len(tail)
