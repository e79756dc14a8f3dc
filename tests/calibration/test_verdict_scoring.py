"""The claim set, the agreement metrics, prompts as data, and calibrated verdicts (maths and the training wrapper)."""

import json
import math

import pytest
from fakes import LogprobVerifier, lp

from rlce_trl.calibration.agreement import CONTENT_FREE_CLAIMS, fit_calibration, read_verdicts, score_prompts
from rlce_trl.calibration.cases import load_cases, preference_claims, split_cases
from rlce_trl.calibration.metrics import accuracy, bootstrap, cohen_kappa, yes_rate
from rlce_trl.evidence.prompt_set import VerifierPrompts, load_prompts
from rlce_trl.evidence.prompts import construction_messages, validation_messages
from rlce_trl.verifiers.base import Reply, Request
from rlce_trl.verifiers.calibrated import CalibratedVerifier, VerdictCalibration


def test_claim_set_shape_and_split():
    cases = preference_claims()
    assert len(cases) == 100
    assert [sum(c.label == v for c in cases) for v in ("yes", "no", "unknown")] == [40, 40, 20]
    cal, held = split_cases(cases, "calibration"), split_cases(cases, "held-out")
    assert len(cal) == len(held) == 50
    assert not {c.context for c in cal} & {c.context for c in held}  # no conversation in both halves
    for case in cases:
        if case.source == "true":  # the row's own preference is in its conversation, the other row's is not
            assert case.test.split(": ", 1)[1] in case.context
        if case.source == "false":
            assert case.test.split(": ", 1)[1] not in case.context
    assert preference_claims() == cases  # deterministic


def test_load_cases_names_the_bad_row(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps({"context": "c", "test": "t", "label": "Yes"}) + "\n")
    assert load_cases(path)[0].label == "yes"
    path.write_text(json.dumps({"context": "c", "test": "t", "label": "maybe"}) + "\n")
    with pytest.raises(ValueError, match="row 1: label 'maybe'"):
        load_cases(path)
    path.write_text(json.dumps({"context": "c", "label": "no"}) + "\n")
    with pytest.raises(ValueError, match="row 1: needs non-empty string fields test"):
        load_cases(path)
    with pytest.raises(ValueError, match="Cannot read"):
        load_cases(tmp_path / "missing.jsonl")


def test_metrics():
    gold = ["yes", "yes", "no", "no", "unknown"]
    pred = ["yes", "no", "no", "no", "yes"]
    assert accuracy(pred, gold) == pytest.approx(0.6)
    # observed 0.6; expected (2*2 + 3*2 + 0*1) / 25 = 0.4 -> kappa = 0.2 / 0.6
    assert cohen_kappa(pred, gold) == pytest.approx(1 / 3)
    assert yes_rate(pred) == pytest.approx(0.4)
    assert math.isnan(cohen_kappa(["yes"] * 3, ["yes"] * 3))
    est = bootstrap(pred * 10, gold * 10, accuracy, resamples=300)
    assert est.low <= 0.6 <= est.high and 0 < est.high - est.low < 0.4


def test_default_prompt_set_reproduces_the_builtin_messages():
    prompts = VerifierPrompts()
    assert validation_messages("ctx", "a {claim}", prompts) == validation_messages("ctx", "a {claim}")
    assert construction_messages("ctx", "x", "y", prompts) == construction_messages("ctx", "x", "y")
    assert "a {claim}" in validation_messages("ctx", "a {claim}")[-1]["content"]  # braces in a test are kept


def test_prompts_file_roundtrip_and_errors(tmp_path):
    shot = {"kind": "validation", "context": "User: I hate fish.", "test": "The user dislikes fish.", "verdict": "yes"}
    prompts = VerifierPrompts(validation="Claim: {test}\nyes or no?", examples=(shot,), version="v7")
    prompts.save(tmp_path / "p.json")
    loaded = load_prompts(tmp_path / "p.json")
    assert loaded == prompts
    messages = validation_messages("ctx", "t", loaded)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"] and messages[2]["content"] == "yes"
    (tmp_path / "p.yaml").write_text("version: y1\nvalidation: 'Is {test} shown?'\n")
    assert load_prompts(tmp_path / "p.yaml").validation == "Is {test} shown?"
    (tmp_path / "bad.json").write_text(json.dumps({"validation": "no slot", "examples": [{"kind": "x"}], "extra": 1}))
    with pytest.raises(ValueError, match="unknown keys"):
        load_prompts(tmp_path / "bad.json")
    (tmp_path / "bad.json").write_text(json.dumps({"validation": "no slot", "examples": [{"kind": "x"}]}))
    with pytest.raises(ValueError, match=r"needs the slot \{test\}.*example 0 needs `kind`"):
        load_prompts(tmp_path / "bad.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_prompts(tmp_path / "bad.json")


def test_contextual_calibration_and_unknown_band():
    # the model leans to "yes": a content-free claim gets yes 0.8
    prior = {"yes": 0.8, "no": 0.15, "unknown": 0.05}
    leaning = lp(0.6, 0.35, 0.05)  # raw argmax yes; calibrated: yes 0.75, no 2.33, unknown 1 -> no
    assert VerdictCalibration().verdict(leaning) == "yes"
    assert VerdictCalibration(prior=prior).verdict(leaning) == "no"
    # the band turns a close yes/no call into unknown
    close = lp(0.5, 0.45, 0.05)
    assert VerdictCalibration(band=0.2).verdict(close) == "unknown"
    assert VerdictCalibration(band=0.05).verdict(close) == "yes"


def test_fit_calibration_moves_yes_rate_to_truth_and_score_reports_it():
    # a fake model that says yes to everything, slightly less so to false claims
    table = {"true": lp(0.9, 0.08, 0.02), "false": lp(0.7, 0.28, 0.02)}
    table.update({c: lp(0.8, 0.18, 0.02) for c in CONTENT_FREE_CLAIMS})
    from rlce_trl.calibration.cases import CalibrationCase

    cases = [CalibrationCase(str(k), f"ctx {k}", "true" if k % 2 else "false", "yes" if k % 2 else "no")
             for k in range(20)]
    verifier = LogprobVerifier(table, default=lp(0.8, 0.18, 0.02))
    raw = score_prompts(verifier, VerifierPrompts(), cases, resamples=50)
    assert raw.yes_rate.value == 1.0 and raw.kappa.value == 0.0
    calibration = fit_calibration(verifier, VerifierPrompts(), cases, band=False)
    assert calibration.prior["yes"] == pytest.approx(0.8) and calibration.fitted_on == 20
    fixed = score_prompts(verifier, VerifierPrompts(), cases, calibration, resamples=50)
    assert fixed.yes_rate.value == pytest.approx(0.5) and fixed.accuracy.value == 1.0
    assert fixed.version == "default+calibrated"


def test_calibration_file_errors(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"prior": {"yes": 0}, "band": 0.1}))
    with pytest.raises(ValueError, match="every `prior` value > 0"):
        VerdictCalibration.load(tmp_path / "c.json")
    (tmp_path / "c.json").write_text(json.dumps({"bogus": 1}))
    with pytest.raises(ValueError, match="calibrate fit"):
        VerdictCalibration.load(tmp_path / "c.json")


def test_fit_needs_choice_logprobs():
    from fakes import PromptSensitiveSyntheticVerifier, synthetic_cases

    with pytest.raises(ValueError, match="no choice log-probabilities"):
        fit_calibration(PromptSensitiveSyntheticVerifier({}), VerifierPrompts(), synthetic_cases("A", 4))


def test_unreadable_replies_count_as_unknown():
    replies = [Reply(["Yes."], ["stop"]), Reply(["hmm"], ["stop"]), Reply.failed(1, "boom")]
    assert read_verdicts(replies) == (["yes", "unknown", "unknown"], 2)


def test_calibrated_verifier_rewrites_validation_replies_only():
    inner = LogprobVerifier({"x": lp(0.6, 0.35, 0.05)}, default=lp(0.6, 0.35, 0.05))
    wrapped = CalibratedVerifier(inner, VerdictCalibration(prior={"yes": 0.8, "no": 0.15, "unknown": 0.05}))
    validation = Request(validation_messages("ctx", "x"), choices=("yes", "no", "unknown"), stage="validation")
    other = Request(validation_messages("ctx", "x"), stage="construction")
    replies = wrapped.generate([validation, other])
    assert [r.texts[0] for r in replies] == ["no", "yes"]
    assert inner.stats.calls == 1 and wrapped.stats.calls == 1
