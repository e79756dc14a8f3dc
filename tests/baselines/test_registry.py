"""The reward-method registry: every name builds a scorer with the EvidencePipeline interface."""

import pytest
from scripted import ScriptedVerifier, evidence_verifier

from rlce_trl.baselines import REWARD_METHODS, build_scorer
from rlce_trl.evidence.pipeline import EvidencePipeline, EvidenceSettings
from rlce_trl.evidence.state import Group


def test_names_and_rlce_modes():
    assert set(REWARD_METHODS) == {
        "rlce", "rlce_static", "rlce_pointwise", "usc", "policy_judge", "ttrl", "rar", "rler"}
    verifier = ScriptedVerifier(lambda request: "")
    settings = EvidenceSettings(tests_per_direction=3)
    rlce = build_scorer("rlce", verifier, settings)
    assert isinstance(rlce, EvidencePipeline) and rlce.settings is settings
    static = build_scorer("rlce_static", verifier, settings)
    assert static.settings.mode == "static" and static.settings.tests_per_direction == 3
    assert build_scorer("rlce_pointwise", verifier).settings.mode == "pointwise"
    assert build_scorer("rler", verifier, max_active=3).max_active == 3
    assert build_scorer("rar", verifier).evolving is False


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(ValueError, match="rlce, rlce_static, rlce_pointwise, usc, policy_judge, ttrl, rar, rler"):
        build_scorer("grpo", ScriptedVerifier(lambda request: ""), None)


@pytest.mark.parametrize("name", sorted(REWARD_METHODS))
def test_every_scorer_keeps_the_contract(name):
    groups = [Group("User: q", ["\\boxed{positive}", "\\boxed{negative}", "\\boxed{positive}"],
                    labels=("positive", "negative"))]
    verifier = evidence_verifier({"positive>negative": "yes", "negative>positive": "no"})
    base = verifier.reply

    def reply(request):  # the evidence script, plus harmless answers for the baselines' stages
        if request.stage in {"construction", "validation", "equivalence"}:
            return base(request)
        return {"judge": "Yes", "rubric_judge": "2", "usc_selection": "1"}.get(
            request.stage, '{"rubrics": [{"criterion": "is clear", "type": "positive"}]}')

    verifier.reply = reply
    scorer = build_scorer(name, verifier, EvidenceSettings(redact_answers=False))
    results, stats = scorer.score(groups)
    (r,) = results
    assert len(r.verified) == 3 and r.assignment == [0, 1, 0] and r.answers == ["positive", "negative"]
    assert stats.groups == 1 and sum(stats.statuses.values()) == 1
    assert len({b[0].stage for b in verifier.batches}) == len(verifier.batches)  # one call per stage
    for method in ("pop_state_updates", "apply_state_updates", "state_dict", "load_state_dict"):
        assert hasattr(scorer, method) == (name in {"rlce", "rlce_static", "rlce_pointwise", "rar", "rler"})
