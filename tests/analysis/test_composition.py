"""Aggregate-verdict accuracy versus composed tests and incorrect tests, and the simulation (hand-computed)."""

import numpy as np
import pytest

from rlce_trl.analysis.composition import (
    accuracy_vs_incorrect_fraction,
    accuracy_vs_num_tests,
    as_tests,
    composition_curve,
    incorrect_fraction,
    is_incorrect_test,
    verdict_credit,
)
from rlce_trl.analysis.simulation import exact_single_test_accuracy, simulate_composition, simulated_tests

CORRECT = [True, False]  # answer 0 is right


def make_tests(*spec):
    """("0>1", "yes") ... as logged dicts."""
    out = []
    for pair, verdict in spec:
        i, j = pair.split(">")
        out.append({"favoured": int(i), "against": None if j == "-" else int(j), "verdict": verdict})
    return as_tests(out)


# (tests, credit with ties="random", credit with ties="wrong")
CREDITS = [
    (make_tests(("0>1", "yes")), 1.0, 1.0),  # V = (1, -1)
    (make_tests(("1>0", "yes")), 0.0, 0.0),
    (make_tests(("0>1", "no")), 0.5, 0.0),  # V = (0, 0): a tie
    (make_tests(("0>1", "yes"), ("1>0", "yes")), 0.5, 0.0),  # V = (1 - 1, 1 - 1)
    (make_tests(("0>1", "yes"), ("1>0", "no"), ("1>0", "yes")), 1.0, 1.0),  # V0 = 1 - .5, V1 = .5 - 1
    (make_tests(("0>1", "unknown")), None, None),  # every test abstained: no verdict
    (make_tests(("0>-", "yes"), ("1>-", "no")), 1.0, 1.0),  # pointwise: satisfied shares 1 and 0
]


@pytest.mark.parametrize("spec,random_credit,wrong_credit", CREDITS)
def test_verdict_credit(spec, random_credit, wrong_credit):
    assert verdict_credit(spec, CORRECT, "random") == random_credit
    assert verdict_credit(spec, CORRECT, "wrong") == wrong_credit


def test_incorrect_tests():
    three = [True, False, False]
    group = make_tests(
        ("0>1", "yes"), ("0>1", "no"), ("1>0", "yes"), ("1>0", "no"), ("1>2", "yes"), ("0>2", "unknown")
    )
    flags = [is_incorrect_test(t, three) for t in group]
    assert flags == [False, True, True, False, None, None]  # 1>2 is between two wrong answers: uninformative
    assert incorrect_fraction(group, three) == 0.5
    assert incorrect_fraction(make_tests(("1>2", "yes")), three) is None


def test_composition_curve_adds_tests_without_replacement():
    group = make_tests(("0>1", "yes"), ("1>0", "yes"), ("1>0", "no"), ("0>1", "unknown"))
    curve = composition_curve(group, CORRECT, max_tests=4, permutations=200, rng=np.random.default_rng(0))
    # k=3 uses every usable test whatever the order: V0 = 1 - .5 > V1 = .5 - 1 -> correct; k=4 does not exist
    assert curve[2] == 1.0 and curve[3] is None
    # k=1: a random one of the three tests: correct 1, wrong 0, tie .5 -> expected 0.5
    assert curve[0] == pytest.approx(0.5, abs=0.08)


def test_aggregate_curves_skip_ineligible_groups():
    groups = [
        (make_tests(("0>1", "yes"), ("1>0", "no")), CORRECT),  # 0 incorrect tests, verdict right
        (make_tests(("0>1", "no"), ("1>0", "yes")), CORRECT),  # 100% incorrect, verdict wrong
        (make_tests(("0>1", "yes")), [True, True]),  # every answer correct: not eligible
    ]
    by_k = accuracy_vs_num_tests(groups, max_tests=3, permutations=5)
    assert [(p.x, p.groups) for p in by_k] == [(1, 2), (2, 2), (3, 0)] and by_k[1].accuracy == 0.5
    by_fraction = accuracy_vs_incorrect_fraction(groups)
    assert by_fraction[0].x == "0-20%" and (by_fraction[0].accuracy, by_fraction[0].groups) == (1.0, 1)
    assert (by_fraction[-1].x, by_fraction[-1].accuracy, by_fraction[-1].groups) == ("80-100%", 0.0, 1)


@pytest.mark.parametrize("error_rate", [0.2, 0.4])
def test_simulation_matches_the_closed_form_and_grows(error_rate):
    (result,) = simulate_composition([error_rate], max_tests=12, trials=400, seed=1)
    accuracy = [p.accuracy for p in result.by_num_tests]
    assert accuracy[0] == pytest.approx(exact_single_test_accuracy(error_rate), abs=0.05)
    assert accuracy[11] > accuracy[0] + 0.1  # composing tests helps
    assert all(p.groups == 400 for p in result.by_num_tests)


def test_simulated_tests_shape_and_perfect_validator():
    rng = np.random.default_rng(0)
    group, correct = simulated_tests(rng, num_answers=3, tests_per_direction=2, error_rate=0.0)
    assert len(group) == 3 * 2 * 2 and correct == [True, False, False]
    assert incorrect_fraction(group, correct) == 0.0 and verdict_credit(group, correct) == 1.0
