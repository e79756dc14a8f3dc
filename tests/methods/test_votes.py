"""TTRL and closed-label USC: majority votes, no verifier call (hand-computed groups)."""

import pytest
from fakes import ScriptedVerifier

from rlce_trl.evidence.pipeline import EvidenceSettings
from rlce_trl.methods import TTRLScorer, USCScorer
from rlce_trl.scoring import Group

LABELS = ("positive", "negative", "neutral")


def boxed(*answers):
    return [f"Reasoning... \\boxed{{{a}}}" if a is not None else "I am not sure." for a in answers]


def no_calls():
    return ScriptedVerifier(lambda request: pytest.fail(f"unexpected {request.stage} call"))


# (rollout answers, TTRL rewards, TTRL status, USC rewards, USC status)
VOTES = [
    (("positive", "negative", "positive", None), [1.0, 0.0, 1.0, 0.0], "voted", [1.0, 0.0, 1.0, 0.0], "voted"),
    (("positive", "negative", "negative", "positive"), [1.0, 0.0, 0.0, 1.0], "tie_first", [None] * 4, "tie"),
    (("neutral", "Neutral", "banana", None), [1.0, 1.0, 0.0, 0.0], "voted", [1.0, 1.0, 0.0, 0.0], "voted"),
    ((None, "banana", None, None), [None] * 4, "no_answer", [None] * 4, "no_answer"),
    (("negative", "positive", "neutral", "positive"), [0.0, 1.0, 0.0, 1.0], "voted", [0.0, 1.0, 0.0, 1.0], "voted"),
]


@pytest.mark.parametrize("answers,ttrl_rewards,ttrl_status,usc_rewards,usc_status", VOTES)
def test_closed_label_votes(answers, ttrl_rewards, ttrl_status, usc_rewards, usc_status):
    group = Group("c", boxed(*answers), labels=LABELS)
    verifier = no_calls()
    (ttrl,), _ = TTRLScorer(verifier).score([group])
    (usc,), _ = USCScorer(verifier).score([group])
    assert (ttrl.verified, ttrl.status) == (ttrl_rewards, ttrl_status)
    assert (usc.verified, usc.status) == (usc_rewards, usc_status)
    assert verifier.batches == []


def test_ttrl_tie_rule_none_and_scores():
    group = Group("c", boxed("positive", "negative"), labels=LABELS)
    (r,), stats = TTRLScorer(tie="none").score([group])
    assert r.verified == [None, None] and r.status == "tie" and r.scores == [1.0, 1.0]
    assert stats.extra["initial_ties"] == 1
    with pytest.raises(ValueError, match="first, none"):
        TTRLScorer(tie="random")


def test_ttrl_free_text_votes_on_normalized_answers():
    group = Group("c", boxed("A quiet cafe.", "a quiet  cafe", "a loud bar", None))
    (r,), stats = TTRLScorer(None, EvidenceSettings(answer_fallback=False)).score([group])
    assert r.answers == ["A quiet cafe.", "a loud bar"] and r.assignment == [0, 0, 1, None]
    assert r.verified == [1.0, 1.0, 0.0, 0.0] and r.verified_answer == "A quiet cafe."
    assert stats.statuses == {"voted": 1} and stats.distinct_answers == [2]
