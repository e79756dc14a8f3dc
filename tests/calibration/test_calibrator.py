"""Coactive calibration: acceptance / rejection, stopping rules, and a synthetic reproduction of VeriFine's
R1 -> R2."""

import pytest
from fakes import PromptSensitiveSyntheticVerifier, synthetic_cases

from rlce_trl.calibration.agreement import score_prompts
from rlce_trl.calibration.calibrator import CoactiveCalibrator, few_shot_proposer, list_proposer
from rlce_trl.evidence.prompt_set import VerifierPrompts
from rlce_trl.evidence.prompts import VALIDATION_TEMPLATE

BASE = VerifierPrompts(version="v1")


def variant(tag: str) -> VerifierPrompts:
    return VerifierPrompts(validation=f"[{tag}] " + VALIDATION_TEMPLATE, version=tag)


def scripted_scorer(table):
    """A scorer from a table `{version: (current, retained)}`; cases are told apart by their split."""

    def scorer(prompts, cases):
        cur, ret = table[prompts.version]
        value = ret if cases and cases[0].split == "held-out" else cur
        return value, [c.label for c in cases]

    return scorer


CURRENT = synthetic_cases("A", 4)
RETAINED = synthetic_cases("R", 4, split="held-out")


def test_accepts_a_gain_and_rejects_a_gain_that_regresses_retained_cases():
    table = {"v1": (0.50, 0.80), "gain": (0.60, 0.79), "regress": (0.70, 0.76), "worse": (0.55, 0.90)}
    calibrator = CoactiveCalibrator(
        None, [list_proposer([variant("gain"), variant("regress"), variant("worse")])],
        scorer=scripted_scorer(table), max_regression=0.02, min_gain=0.0,
    )
    best, history = calibrator.run(BASE, CURRENT, RETAINED)
    assert best.version == "gain"
    decisions = {h.version: h.accepted for h in history}
    assert decisions == {"v1": True, "gain": True, "regress": False, "worse": False}
    regress = next(h for h in history if h.version == "regress")
    assert regress.gain == pytest.approx(0.10) and regress.regression == pytest.approx(0.03)
    assert "retained regresses" in regress.reason
    assert calibrator.stop_reason == "no more proposals"


def test_regression_within_tolerance_is_accepted():
    table = {"v1": (0.50, 0.80), "ok": (0.55, 0.785)}
    best, _ = CoactiveCalibrator(None, [list_proposer([variant("ok")])], scorer=scripted_scorer(table)).run(
        BASE, CURRENT, RETAINED
    )
    assert best.version == "ok"


def test_max_versions_stops():
    variants = [variant(f"x{k}") for k in range(10)]
    table = {"v1": (0.1, 0.5), **{f"x{k}": (0.1 + 0.01 * (k + 1), 0.5) for k in range(10)}}
    calibrator = CoactiveCalibrator(None, [list_proposer(variants)], scorer=scripted_scorer(table), max_versions=3,
                                    min_gain=0.0)
    best, history = calibrator.run(BASE, CURRENT, RETAINED)
    assert len(history) == 4 and best.version == "x2" and calibrator.stop_reason == "max_versions"


def test_patience_stops_when_gains_stall():
    variants = [variant(f"x{k}") for k in range(10)]
    table = {"v1": (0.5, 0.5), **{f"x{k}": (0.4, 0.5) for k in range(10)}}  # every candidate is worse
    calibrator = CoactiveCalibrator(None, [list_proposer(variants)], scorer=scripted_scorer(table), patience=3,
                                    min_gain=0.02)
    best, history = calibrator.run(BASE, CURRENT, RETAINED)
    assert len(history) == 1 + 3 and best.version == "v1" and calibrator.stop_reason == "patience"


def test_invalid_settings_are_one_error():
    with pytest.raises(ValueError, match="max_versions.*patience.*max_regression.*metric"):
        CoactiveCalibrator(None, [], max_versions=0, patience=0, max_regression=-1, metric="pearson",
                           scorer=lambda p, c: (0.0, []))


def test_few_shot_proposer_adds_disagreements_with_their_labels():
    verifier = PromptSensitiveSyntheticVerifier({("", "A"): 0.5})
    cases = synthetic_cases("A", 20)
    proposer = few_shot_proposer(cases, max_examples=2)
    predictions = score_prompts(verifier, BASE, cases, resamples=0).predictions
    wrong = [c for c, p in zip(cases, predictions, strict=True) if p != c.label]
    first = proposer(BASE, wrong, 1)
    by_test = {c.test: c.label for c in wrong}
    assert len(first.examples) == 1 and by_test[first.examples[0]["test"]] == first.examples[0]["verdict"]
    second = proposer(first, wrong, 2)
    third = proposer(second, wrong, 3)
    assert len(third.examples) == 2  # the oldest example was swapped out
    assert {e["verdict"] for e in second.examples} <= {"yes", "no"}
    turns = third.example_turns("validation")
    assert [t["role"] for t in turns] == ["user", "assistant"] * 2


def test_synthetic_reproduction_of_the_r1_r2_pattern():
    """VeriFine: the R1 judge agrees on its own distribution (r 0.72) but not on R2's challenging one (0.07); a
    revision recovers R2 (0.74) without losing R1. Here: v1 has error 0.2 on A and 0.5 on B; v2 has 0.2 on A (the
    same cases) and 0.1 on B; a decoy 'b-only' fixes B but breaks A and must be rejected."""
    verifier = PromptSensitiveSyntheticVerifier(
        {("[v2]", "A"): 0.2, ("[v2]", "B"): 0.1, ("[b-only]", "A"): 0.5, ("[b-only]", "B"): 0.05,
         ("", "A"): 0.2, ("", "B"): 0.5}, seed=3,
    )
    a_cases, b_cases = synthetic_cases("A", 200), synthetic_cases("B", 200)

    def kappa(prompts, cases):
        return score_prompts(verifier, prompts, cases, resamples=0).kappa.value

    r1_a, r1_b = kappa(BASE, a_cases), kappa(BASE, b_cases)
    assert r1_a > 0.5 and r1_b < 0.15
    calibrator = CoactiveCalibrator(verifier, [list_proposer([variant("b-only"), variant("v2")])], min_gain=0.0)
    before = verifier.stats.calls
    best, history = calibrator.run(BASE, b_cases, retained=a_cases)
    assert verifier.stats.calls - before == len(history)  # one batched call per version: current and retained
    assert [h.accepted for h in history] == [True, False, True] and best.version == "v2"
    assert kappa(best, b_cases) > 0.6
    assert kappa(best, a_cases) >= r1_a - 0.02
    assert kappa(best, a_cases + b_cases) >= kappa(BASE, a_cases + b_cases)
