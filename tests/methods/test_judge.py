"""Policy LLM-Judge: one pointwise Yes/No per distinct answer, all groups in one call."""

import re

from fakes import ScriptedVerifier

from rlce_trl.evidence.pipeline import EvidenceSettings
from rlce_trl.methods import PolicyJudgeScorer
from rlce_trl.methods.baseline_prompts import parse_yes_no
from rlce_trl.scoring import Group

LABELS = ("positive", "negative", "neutral")


def judged(request):
    pattern = r"Proposed (?:answer|response) to the final request in the input:\s(.*?)\n\nIs the proposed"
    return re.search(pattern, request.messages[-1]["content"], flags=re.S).group(1)


def test_pointwise_judgments_shared_by_rollouts_and_batched():
    groups = [
        Group("User: clip\nOptions: positive, negative, neutral.", [
            "\\boxed{positive}", "\\boxed{negative}", "\\boxed{Positive}", "none"], labels=LABELS),
        Group("User: clip 2", ["\\boxed{a cafe}", "\\boxed{A cafe.}", "\\boxed{a bar}", "\\boxed{a park}"]),
    ]
    replies = {"positive": "Yes", "negative": "No.", "\\boxed{a cafe}": "**No**", "\\boxed{A cafe.}": "No",
               "\\boxed{a bar}": "yes", "\\boxed{a park}": "maybe"}
    verifier = ScriptedVerifier(lambda request: replies[judged(request)])
    (closed, free), stats = PolicyJudgeScorer(verifier).score(groups)
    # one per distinct label (closed), one per distinct response (free text, D.2's "proposed response")
    assert len(verifier.batches) == 1 and len(verifier.batches[0]) == 2 + 4
    first = verifier.batches[0][0]
    assert first.choices == ("Yes", "No") and first.sampling.greedy and first.stage == "judge"
    assert "Options:" not in first.messages[-1]["content"]  # D.2: the other options are not shown
    assert closed.verified == [1.0, 0.0, 1.0, 0.0] and closed.scores == [1.0, 0.0]
    assert closed.verified_answer == "positive" and closed.status == "judged"
    assert free.verified == [0.0, 0.0, 1.0, 0.0] and free.scores == [0.0, 1.0, None]
    assert stats.verdicts == {"yes": 2, "no": 3, "invalid": 1} and stats.verdict_failures == {"unreadable_judgment": 1}


def test_free_text_judges_each_distinct_response_whole():
    responses = ["The user is vegan, so try the lentil soup. \\boxed{lentil soup}",
                 "The  user is vegan, so try the lentil soup.\n\\boxed{lentil soup}",  # the same, whitespace aside
                 "Steak is great. \\boxed{lentil soup}", "", "Have the steak. \\boxed{steak}"]
    verifier = ScriptedVerifier(lambda request: "No" if "Steak is great" in judged(request) else "Yes")
    (r,), stats = PolicyJudgeScorer(verifier).score([Group("User: I am vegan. What should I eat?", responses)])
    shown = [judged(request) for request in verifier.batches[0]]
    assert shown == [responses[0], responses[2], responses[4]]  # whole responses, each once; the empty one never
    assert "Proposed response" in verifier.batches[0][0].messages[-1]["content"]
    assert r.verified == [1.0, 1.0, 0.0, 0.0, 1.0]
    assert r.answers == ["lentil soup", "steak"] and r.scores == [2 / 3, 1.0] and r.verified_answer == "steak"


def test_no_answer_judged_correct_gives_zero_rewards_and_no_answer_gives_none():
    groups = [Group("c", ["\\boxed{x}", "\\boxed{y}"]), Group("c", ["nothing", "at all"])]
    boxed_only = EvidenceSettings(answer_fallback=False)  # the second group's rollouts then have no answer
    (r1, r2), _ = PolicyJudgeScorer(ScriptedVerifier(lambda request: "No"), boxed_only).score(groups)
    assert r1.verified == [0.0, 0.0] and r1.status == "none_correct"
    assert r2.verified == [None, None] and r2.status == "no_answer"


def test_parse_yes_no():
    assert parse_yes_no("Yes, because ...") == "yes"
    assert parse_yes_no("The answer is no.") == "no"
    assert parse_yes_no("yes or no?") == "yes"  # first word decides
    assert parse_yes_no("I think it could be yes or it could be no") is None
