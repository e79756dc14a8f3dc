import json
from pathlib import Path

import pytest

from rlce_trl.evidence.canonicalization import parse_equivalence
from rlce_trl.evidence.construction import parse_test
from rlce_trl.evidence.validation import REDACTION, parse_verdict, redact_answers

VECTORS = json.loads((Path(__file__).parent / "verdict_vectors.json").read_text())


@pytest.mark.parametrize("case", VECTORS, ids=[v["reply"][:30] or "<empty>" for v in VECTORS])
def test_verdict_vectors(case):
    assert parse_verdict(case["reply"], case["finish"]) == (case["verdict"], case["failure"])


@pytest.mark.parametrize(
    "reply, finish, expected",
    [
        ("The user states they are vegetarian.", "stop", ("The user states they are vegetarian.", None)),
        ("Test: The user mentions a budget.\nBecause...", "stop", ("The user mentions a budget.", None)),
        ('1. **Evidence test:** "The user asks for quiet places."', "stop", ("The user asks for quiet places.", None)),
        ("Testing shows 3 cats: the user has 2024 plans.", "stop", ("Testing shows 3 cats: the user has 2024 plans.", None)),
        ("", "stop", (None, "empty")),
        ("The user said that the user said that the user", "length", (None, "runaway")),
        ("The user likes tea.\nand then more and more", "length", ("The user likes tea.", None)),
        ("x" * 700, "stop", (None, "runaway")),
        ("anything", "error", (None, "error")),
    ],
)
def test_parse_test(reply, finish, expected):
    assert parse_test(reply, finish) == expected


def test_parse_equivalence_json_prose_and_lines():
    assert parse_equivalence('Sure! {"P1": "same", "P2": "different"}', 2) == ([True, False], True)
    assert parse_equivalence("P1: same\nP2: Different", 2) == ([True, False], True)
    # Truncated JSON: what was written whole is read, the rest is not merged.
    assert parse_equivalence('{"P1": "same", "P2": "diff', 2) == ([True, None], False)
    assert parse_equivalence('{"P1": "perhaps", "P2": "yes"}', 2) == ([None, True], False)


def test_redaction_removes_answers_but_keeps_words():
    test = "The user's tone favours Highly Positive over negative; not a positively neutral aside."
    redacted = redact_answers(test, ["highly positive", "negative", "no"])
    assert redacted == f"The user's tone favours {REDACTION} over {REDACTION}; not a positively neutral aside."
