"""Answer extraction and canonicalization (paper section 3.2, "Evidence test construction"; appendix A, extraction).

Rollouts are reduced to *distinct answers* (`canonicalization.py`) before any test is built, so repeated answers
collapse and answer frequency never affects the verification score.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

_BOXED = "\\boxed{"
# What may follow the final \boxed{} and still count as "ending in the boxed format": whitespace, a closing
# sentence mark, the end of an inline math span, markdown emphasis.
_TRAILER = re.compile(r"[\s.$*`]*")


def boxed_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every balanced `\\boxed{...}`, `end` one past the closing brace."""
    spans, i = [], text.find(_BOXED)
    while i != -1:
        depth, j = 1, i + len(_BOXED)
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        if depth == 0:
            spans.append((i, j))
        i = text.find(_BOXED, i + 1)
    return spans


def last_boxed(text: str) -> str | None:
    """Content of the last balanced `\\boxed{...}` in `text`, stripped (possibly empty); `None` without one."""
    spans = boxed_spans(text or "")
    if not spans:
        return None
    start, end = spans[-1]
    return text[start + len(_BOXED) : end - 1].strip()


def tag_content(text: str | None, tag: str) -> str | None:
    """Stripped content of the LAST `<tag>...</tag>` in `text` (any case, across lines); `None` if absent."""
    found = re.findall(rf"<{tag}>(.*?)</{tag}>", text or "", flags=re.DOTALL | re.IGNORECASE)
    return found[-1].strip() if found else None


def extract_boxed(text: str) -> str | None:
    """Content of the last balanced `\\boxed{...}` in `text`, stripped; `None` if there is none or it is empty."""
    return last_boxed(text) or None


def ends_with_boxed(text: str) -> bool:
    """Whether the response *ends* in the required `\\boxed{}` answer format (appendix C.2, the format reward)."""
    return bool(last_boxed(text)) and _TRAILER.fullmatch(text, boxed_spans(text)[-1][1]) is not None


def normalize_answer(answer: str) -> str:
    """Deterministic surface normal form: Unicode NFKC, case-folded, whitespace collapsed, outer punctuation dropped.

    Two answers with the same normal form are the same answer; no model is asked about them.
    """
    text = unicodedata.normalize("NFKC", answer).casefold()
    text = re.sub(r"\\text\{([^{}]*)\}", r"\1", text)  # \text{positive} -> positive
    text = " ".join(text.split())
    return text.strip(" .,;:!?\"'`*()[]")


def match_label(answer: str | None, labels: Sequence[str]) -> str | None:
    """Map an extracted answer to one of the closed labels by normal form; `None` if it matches none (invalid)."""
    if answer is None:
        return None
    by_norm = {normalize_answer(label): label for label in labels}
    return by_norm.get(normalize_answer(answer))


def find_label_in_text(text: str, labels: Sequence[str]) -> str | None:
    """Evaluation fallback when there is no `\\boxed{}`: the option named on the last non-empty line, else the only
    option named anywhere in the response. Longer labels win over labels they contain ("highly negative" over
    "negative"). `None` when no option, or more than one, is found."""

    def named(span: str) -> set[str]:
        found, norm = set(), f" {normalize_answer(span)} "
        for label in sorted(labels, key=len, reverse=True):
            key = f" {normalize_answer(label)} "
            if key in norm:
                found.add(label)
                norm = norm.replace(key, "  ")
        return found

    lines = [line for line in text.splitlines() if line.strip()]
    for span in ([lines[-1]] if lines else []) + [text]:
        found = named(re.sub(r"[^\w\s-]", " ", span))
        if len(found) == 1:
            return found.pop()
    return None


def extract_answer(response: str, labels: Sequence[str] | None = None, fallback: bool = True) -> str | None:
    """The task answer of one response, with the paper's fallbacks (appendix A, "Answer extraction").

    Closed-label tasks (`labels` non-empty): the content of the last `\\boxed{}` must equal a label (by normal form,
    no synonyms); without a box, the last non-empty line and then the whole response are scanned for exactly one
    label. A box whose content is not a label is invalid (`None`). Free-text tasks: the boxed content, else the whole
    response stripped; `None` only for an empty response. Without `fallback` only a boxed answer counts.
    """
    boxed = extract_boxed(response or "")
    if boxed is not None or not fallback:
        return match_label(boxed, labels) if labels else boxed
    return find_label_in_text(response or "", labels) if labels else (response or "").strip() or None
