"""Evidence testing (section 3.2, Eq. 2): each test is checked against the sample by the validator, greedily.

The validator never sees the candidate answers (appendix C.1, "Candidate answers are removed from the validator
input"): they are not in its prompt, the closed-label task's `Options: ...` line is removed from its copy of the
context, and any mention of a candidate answer inside a test is redacted (`redact_answers`; its default mode
`"answers"` is the paper's reading: descriptive words such as "positively upbeat" stay).

Verdicts are yes / no / unknown; "unknown" abstains, and so does any reply that does not assert exactly one verdict
(`verdicts.parse_verdict`, counted by reason, never a crash and never a silent "no").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..verifiers.base import Request, Sampling
from .prompts import VERDICTS, context_without_options, validation_messages
from .verdicts import parse_verdict

__all__ = ["REDACTION", "REDACTION_MODES", "parse_verdict", "redact_answers", "validation_request"]

REDACTION = "[an answer]"
#: `answers`: the candidate answers (and closed labels) as written; `inflections`: closed labels with every ending.
REDACTION_MODES = ("answers", "inflections")
#: Closed-label words shorter than this are matched as they are, never inflected ("no" must not eat "not").
MIN_INFLECTED = 4


def _word_pattern(word: str, inflect: bool, spelling: bool = False) -> str:
    """One word of an answer. Inflected (closed labels): the stem and any ending, with British/US `our`/`or`
    ("positive" -> positively, positivity; "humour" -> humor, humorous). `spelling` only (closed labels, mode
    `answers`): the word itself in British or US spelling ("humour" -> humor), no other ending."""
    if not (inflect or spelling) or len(word) < MIN_INFLECTED or not word.isalpha():
        return re.escape(word)
    if not inflect:
        return re.escape(word).replace("our", "ou?r")
    stem = word[:-1] if word[-1] in "ey" else word
    return re.escape(stem).replace("our", "ou?r") + r"\w*"


def _answer_pattern(answer: str, inflect: bool, spelling: bool = False) -> re.Pattern | None:
    words = answer.split()
    if not words:
        return None
    body = r"[\s-]+".join(_word_pattern(w, inflect, spelling) for w in words)
    left = r"(?<!\w)" if answer[0].isalnum() else ""
    right = r"(?!\w)" if answer[-1].isalnum() or inflect else ""
    # A single letter ("A", "B") is matched in its own case, so the article "a" survives answer "A".
    flags = 0 if len(answer) == 1 and answer.isalpha() else re.IGNORECASE
    return re.compile(left + body + right, flags)


def redact_answers(
    test: str, answers: Sequence[str], labels: Sequence[str] | None = None, mode: str = "answers"
) -> str:
    """Replace every mention of a candidate answer in a test with `REDACTION`, longest answers first.

    Matching is case-insensitive, at word boundaries, across any whitespace or hyphen between an answer's words, and
    for answers of any length (a one-letter answer in its own case). With `labels` (a closed-label task) every label
    is removed, not only the group's answers: as written (British or US spelling) in mode `"answers"`, with its
    inflections ("positively", "humorous") in mode `"inflections"`."""
    if mode not in REDACTION_MODES:
        raise ValueError(f"Unknown redaction mode {mode!r}: use one of {', '.join(REDACTION_MODES)}.")
    inflect = mode == "inflections"
    targets = {(a.strip(), False) for a in answers if a.strip()}
    targets |= {(label.strip(), True) for label in labels or () if label.strip()}
    for answer, is_label in sorted(targets, key=lambda t: (len(t[0]), t[1]), reverse=True):
        pattern = _answer_pattern(answer, is_label and inflect, spelling=is_label)
        if pattern is not None:  # a placeholder first, so a short answer never matches inside an earlier redaction
            test = pattern.sub("\x00", test)
    return test.replace("\x00", REDACTION)


def validation_request(
    context: str, test: str, max_tokens: int, labels: Sequence[str] | None = None, prompts=None, media=None
) -> Request:
    """The validator's request: the context without the options line that lists `labels`, and the (redacted) test;
    `prompts` (an optional `VerifierPrompts`) replaces the default text; `media`: the sample's clips."""
    return Request(
        messages=validation_messages(context_without_options(context, labels), test, prompts),
        sampling=Sampling(temperature=0.0, max_tokens=max_tokens),
        choices=VERDICTS,
        stage="validation",
        media=media,
    )
