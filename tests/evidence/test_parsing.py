import json
from pathlib import Path

import pytest

from rlce_trl.evidence.canonicalization import parse_equivalence
from rlce_trl.evidence.construction import parse_test
from rlce_trl.evidence.validation import REDACTION, parse_verdict, redact_answers, validation_request

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
        ("Testing shows 3 cats: the user has 2024 plans.", "stop",
         ("Testing shows 3 cats: the user has 2024 plans.", None)),
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


@pytest.mark.parametrize(
    "test, answers, labels, expected",
    [
        # the example: descriptive words survive, the labels as answers go
        ("The speaker sounds positively upbeat, neutrality absent, negativity absent.", ["positive"],
         ("positive", "negative", "neutral"),
         "The speaker sounds positively upbeat, neutrality absent, negativity absent."),
        ("The speaker sounds positive, not neutral.", ["positive"], ("positive", "negative", "neutral"),
         "The speaker sounds X, not X."),
        # every label string, even one no rollout gave; British and US spelling are the same word
        ("The clip is humorous; the humor lands, so: humour.", ["not humour"], ("humour", "not humour"),
         "The clip is humorous; the X lands, so: X."),
        ("The clip is not humour at all.", ["humour"], ("humour", "not humour"), "The clip is X at all."),
        ("Highly Negative tone, negativity everywhere.", [], ("highly negative", "negative"),
         "X tone, negativity everywhere."),
        # free text: the same as mode "inflections"
        ("A QUIET   CAFE suits a quiet-cafe lover.", ["a quiet cafe"], None, "X suits X lover."),
    ],
)
def test_redaction_of_answers_keeps_descriptive_words(test, answers, labels, expected):
    assert redact_answers(test, answers, labels) == expected.replace("X", REDACTION)
    assert redact_answers(test, answers, labels, "answers") == expected.replace("X", REDACTION)


def test_unknown_redaction_mode_names_the_choices():
    with pytest.raises(ValueError, match="answers, inflections"):
        redact_answers("a test", ["a"], None, "labels")


@pytest.mark.parametrize(
    "test, answers, labels, expected",
    [
        # short answers, at word boundaries only
        ("The user said no to boats; nothing else.", ["no"], None, "The user said X to boats; nothing else."),
        ("Option A fits: a user wants it.", ["A"], None, "Option X fits: a user wants it."),  # "a" is a word
        ("It costs 42 dollars, not 420.", ["42"], None, "It costs X dollars, not 420."),
        # case, and any whitespace or hyphen between an answer's words
        ("A QUIET   CAFE suits a quiet-cafe lover.", ["a quiet cafe"], None, "X suits X lover."),
        # closed labels: every label, with its inflections, even one no rollout gave
        ("The speaker sounds positively upbeat, not neutral.", ["positive"], ("positive", "negative", "neutral"),
         "The speaker sounds X upbeat, not X."),
        ("The clip is humorous; the humor lands.", ["humour"], ("humour", "not humour"),
         "The clip is X; the X lands."),
        ("The clip is not humorous at all.", ["not humour"], ("humour", "not humour"), "The clip is X at all."),
        ("Highly Negative tone, negativity everywhere.", [], ("highly negative", "negative"), "X tone, X everywhere."),
        # a redaction is never redacted again by a shorter answer
        ("an answer and an apple", ["an", "an answer"], None, "X and X apple"),
    ],
)
def test_redaction_is_robust(test, answers, labels, expected):
    assert redact_answers(test, answers, labels, "inflections") == expected.replace("X", REDACTION)


def test_the_validator_never_sees_the_options_line():
    context = "User: What is the sentiment of the clip?\nOptions: highly negative, negative, neutral, positive."
    labels = ("highly negative", "negative", "neutral", "positive")
    shown = validation_request(context, "The speaker smiles.", 16, labels).messages[-1]["content"]
    assert "Options:" not in shown and "What is the sentiment" in shown and "neutral" not in shown
    # free text keeps its context whole; an "Options:" sentence that lists no labels survives
    assert "Options: we" in validation_request("User: Options: we could go.", "t", 16, None).messages[-1]["content"]
