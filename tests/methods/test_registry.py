"""The reward-method registry (`rlce_trl.methods`): every name builds a scorer the same way, with the whole
`GroupScorer` interface."""

import pytest
from fakes import ScriptedVerifier, evidence_verifier

from rlce_trl.evidence.pipeline import EvidencePipeline, EvidenceSettings
from rlce_trl.methods import METHOD_ALIASES, REWARD_METHODS, build_scorer
from rlce_trl.scoring import Group, GroupScorer, ScorerBase

STATEFUL = {"rlce", "rlce_static", "rlce_pointwise", "rar", "rler"}
COEVOLUTION = {"rlac_generator", "rlac_critic", "visplay_questioner", "visplay_reasoner", "vz_questioner",
               "vz_solver"}  # co-evolution phases (critiques, questions, pseudo-labels): tests/coevolution


def test_names_aliases_and_options():
    assert set(REWARD_METHODS) == {"rlce", "usc", "policy_judge", "ttrl", "rar", "rler", *COEVOLUTION}
    assert set(METHOD_ALIASES) == {"rlce_static", "rlce_pointwise"}
    verifier = ScriptedVerifier(lambda request: "")
    settings = EvidenceSettings(tests_per_direction=3)
    rlce = build_scorer("rlce", verifier, settings)
    assert isinstance(rlce, EvidencePipeline) and rlce.settings is settings and rlce.name == "rlce"
    static = build_scorer("rlce_static", verifier, settings)
    assert static.settings.mode == "static" and static.settings.tests_per_direction == 3
    assert build_scorer("rlce_pointwise", verifier).settings.mode == "pointwise"
    assert build_scorer("rler", verifier, max_active=3).max_active == 3
    rar = build_scorer("rar", verifier)
    assert rar.evolving is False and rar.name == "rar"
    assert build_scorer("ttrl", verifier, settings, tie="none").tie == "none"
    assert build_scorer("rlce", verifier, static_max_classes=4).static_max_classes == 4


def test_unknown_name_or_option_names_the_fix():
    verifier = ScriptedVerifier(lambda request: "")
    with pytest.raises(ValueError, match="use one of rlce, usc, policy_judge, ttrl, rar, rler, .*rlce_static, "
                                         "rlce_pointwise, or your own scorer as 'package.module:Class'"):
        build_scorer("grpo", verifier, None)
    with pytest.raises(TypeError, match=r"reward_method='rler' with reward_method_kwargs=\{'max_actve': 3\}"):
        build_scorer("rler", verifier, max_actve=3)
    with pytest.raises(ValueError, match="cannot import 'no_such_module'"):
        build_scorer("no_such_module:Scorer", verifier)
    with pytest.raises(ValueError, match="has no attribute 'Nope'"):
        build_scorer("rlce_trl.scoring:Nope", verifier)


@pytest.mark.parametrize("name", sorted({*REWARD_METHODS, *METHOD_ALIASES} - COEVOLUTION))
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
    assert isinstance(scorer, GroupScorer) and isinstance(scorer, ScorerBase)
    results, stats = scorer.score(groups)
    (r,) = results
    assert len(r.verified) == 3 and r.assignment == [0, 1, 0] and r.answers == ["positive", "negative"]
    assert stats.groups == 1 and sum(stats.statuses.values()) == 1
    assert len({b[0].stage for b in verifier.batches}) == len(verifier.batches)  # one call per stage
    assert scorer.finalize_batch(groups, results) is results  # the batch hook is a no-op by default
    stateful = type(scorer).state_dict is not ScorerBase.state_dict
    assert stateful == (name in STATEFUL)
    if not stateful:  # the no-op state methods the trainer calls on every scorer
        assert scorer.pop_state_updates() == [] and scorer.state_dict() == {}
        scorer.apply_state_updates([]) or scorer.load_state_dict({})
