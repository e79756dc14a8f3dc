"""Evidence testing (section 3.2, Eq. 2): each test is checked against the sample by the validator, greedily.

The validator never sees the candidate answers: they are not in its prompt, and any verbatim mention of one inside
a test is redacted. Verdicts are yes / no / unknown; "unknown" abstains, and so does any reply that cannot be read
(counted by reason, never a crash and never a silent "no").
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from ..verifiers.base import Request, Sampling
from .prompts import VERDICTS, validation_messages

REDACTION = "[an answer]"


def redact_answers(test: str, answers: Sequence[str]) -> str:
    """Replace verbatim (case-insensitive) mentions of candidate answers in a test; longest answers first."""
    for answer in sorted({a.strip() for a in answers}, key=len, reverse=True):
        if len(answer) < 3:  # too short to be a mention rather than an ordinary word piece
            continue
        left = r"\b" if answer[0].isalnum() else ""
        right = r"\b" if answer[-1].isalnum() else ""
        test = re.sub(left + re.escape(answer) + right, REDACTION, test, flags=re.IGNORECASE)
    return test


def validation_request(context: str, test: str, max_tokens: int, prompts=None) -> Request:
    return Request(
        messages=validation_messages(context, test, prompts),
        sampling=Sampling(temperature=0.0, max_tokens=max_tokens),
        choices=VERDICTS,
        stage="validation",
    )


_WORD = re.compile(r"[a-z]+")


def parse_verdict(text: str, finish_reason: str) -> tuple[str | None, str | None]:
    """`(verdict, None)` or `(None, reason)`; reasons: `error`, `empty`, `malformed_json`, `runaway`,
    `unknown_word` (no verdict word), `ambiguous` (more than one).

    Accepted: a JSON object with a `verdict` / `answer` / `label` field; a reply whose first word is a verdict
    ("Yes.", "**No** - the user never..."); otherwise a reply naming exactly one verdict word. A reply cut off by the
    token limit counts only if it starts with a verdict."""
    if finish_reason == "error":
        return None, "error"
    stripped = text.strip().strip("`").strip()
    if stripped.startswith("json"):
        stripped = stripped[4:].strip()
    if not stripped:
        return None, "empty"
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError:
            return None, "malformed_json"
        value = next((obj[k] for k in ("verdict", "answer", "label") if isinstance(obj, dict) and k in obj), None)
        value = str(value).strip().casefold() if value is not None else ""
        return (value, None) if value in VERDICTS else (None, "unknown_word")
    words = _WORD.findall(stripped.casefold())
    if words and words[0] in VERDICTS:
        return words[0], None
    if finish_reason == "length":
        return None, "runaway"
    named = {w for w in words if w in VERDICTS}
    if len(named) == 1:
        return named.pop(), None
    return None, "ambiguous" if named else "unknown_word"
