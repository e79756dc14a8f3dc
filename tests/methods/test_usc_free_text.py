"""USC on free text: one greedy selection per group, batched, shown the question and responses only."""

from fakes import ScriptedVerifier

from rlce_trl.evidence.pipeline import EvidenceSettings
from rlce_trl.methods import USCScorer
from rlce_trl.methods.baseline_prompts import parse_usc_choice, question_of
from rlce_trl.scoring import Group

BOXED_ONLY = EvidenceSettings(answer_fallback=False)  # these cases are about rollouts with no boxed answer

CONTEXT = "User: I am vegan and live in Paris.\n\nAssistant: Noted!\n\nUser: Where should I eat tonight?"


def test_one_batched_selection_call_and_exact_match_rewards():
    groups = [
        Group(CONTEXT, ["Try \\boxed{Le Potager}", "Try \\boxed{Le Steak}", "Try \\boxed{Le Potager}", "Hmm"]),
        Group(CONTEXT, ["Go to \\boxed{A}", "Go to \\boxed{B}", "I'd say \\boxed{A}", "Go to \\boxed{A}"]),
    ]
    picks = iter(["1", "The most consistent response is Response 3."])
    verifier = ScriptedVerifier(lambda request: next(picks))
    (first, second), stats = USCScorer(verifier, BOXED_ONLY).score(groups)
    assert len(verifier.batches) == 1 and len(verifier.batches[0]) == 2
    request = verifier.batches[0][0]
    assert request.sampling.greedy and request.choices == ("1", "2", "3") and request.stage == "usc_selection"
    prompt = request.messages[-1]["content"]
    # D.1: the question and the parseable responses only, no preference evidence from the context
    assert "Where should I eat tonight?" in prompt and "vegan" not in prompt and "Hmm" not in prompt
    assert first.verified == [1.0, 0.0, 1.0, 0.0] and first.verified_answer == "Le Potager"
    # response 3 of the second group is "I'd say \boxed{A}": only the exact same text is rewarded
    assert second.verified == [0.0, 0.0, 1.0, 0.0] and second.status == "selected"
    assert stats.verdicts == {"selected": 2}


def test_identical_responses_need_no_call_and_unreadable_selection_gives_no_reward():
    same = Group(CONTEXT, ["\\boxed{A}", " \\boxed{A}", "no idea", "\\boxed{A}"])
    differ = Group(CONTEXT, ["\\boxed{A}", "\\boxed{B}"])
    verifier = ScriptedVerifier(lambda request: "I cannot decide.")
    (r1, r2), stats = USCScorer(verifier, BOXED_ONLY).score([same, differ])
    assert r1.verified == [1.0, 1.0, 0.0, 1.0] and r1.status == "single_response"
    assert r2.verified == [None, None] and r2.status == "invalid_selection"
    assert len(verifier.batches[0]) == 1 and stats.verdict_failures == {"unreadable_selection": 1}


def test_question_and_choice_parsing():
    assert question_of(CONTEXT) == "Where should I eat tonight?"
    assert question_of("User: clip transcript...\nWhat is the sentiment?\nOptions: positive, negative.") == (
        "clip transcript...\nWhat is the sentiment?"
    )
    assert parse_usc_choice("Response 2", 3) == 1
    assert parse_usc_choice("**3**", 3) == 2
    assert parse_usc_choice("Response 7", 3) is None


def test_question_fn_and_response_cap():
    group = Group(CONTEXT, ["x" * 50 + "\\boxed{A}", "\\boxed{B}"])
    verifier = ScriptedVerifier(lambda request: "2")
    USCScorer(verifier, question_fn=lambda g: "Q?", max_response_chars=12).score([group])
    prompt = verifier.batches[0][0].messages[-1]["content"]
    assert prompt.startswith("### Input\nQ?") and "...xxx\\boxed{A}" in prompt and "x" * 4 not in prompt
