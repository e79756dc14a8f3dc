"""The simulation bench's bookkeeping (`benchmarks/health_simulation.py`) on a few short runs: what counts as a
healthy step, a false alarm and a detection."""

import dataclasses
from argparse import Namespace

import pytest

from benchmarks.health_simulation import SCENARIOS, Sim, evaluate, false_rate, simulate
from rlce_trl.health import HealthThresholds

ARGS = Namespace(groups=8, generations=4, labels=4, steps=40, warmup=3, window=3)


@pytest.fixture(scope="module")
def runs():
    return simulate(range(2), ARGS)


def test_entrenchment_ramp_is_neither_healthy_nor_a_detection():
    sim = Sim("entrenchment", "rlce", seed=0)
    assert sim.entrenched(sim.start - 1) == 0.0 < sim.entrenched(sim.start)  # healthy up to the ramp start
    assert sim.entrenched(sim.onset) == 0.5 and sim.start < sim.onset
    sharp = Sim("within_group", "ttrl", seed=0)
    assert sharp.start == sharp.onset and sharp.level(sharp.onset - 1) == 0.0 < sharp.level(sharp.onset)


def test_false_alarms_are_counted_per_rule_over_the_steps_it_was_checked(runs):
    result = evaluate(runs, HealthThresholds())
    total, alone = result["total"], result["alone"]
    checked_rlce_only = total["steps"]["entrenchment"]
    assert 0 < checked_rlce_only < total["steps"]["any"]  # entrenchment is not checked on TTRL runs
    assert total["steps"]["within_group_collapse"] == total["steps"]["any"]  # checked on every step
    for rule in ("entrenchment", "verifier_drift", "answer_loss", "any"):
        assert 0 <= total["false"][rule] <= total["steps"][rule]
        assert alone["steps"][rule] <= total["steps"][rule]
    assert result["healthy_runs"] == 2 * len(SCENARIOS["healthy"])
    # a rule that fires everywhere: a false alarm on every healthy step it is checked on, and every failure found
    always = dataclasses.replace(HealthThresholds(), answered_ratio=100.0)  # past any share: fires on every step
    fired = evaluate(runs, always)
    assert false_rate(fired["total"], "answer_loss") == 1.0
    assert all(d == 0 for d in fired["delays"][("stops_answering", "ttrl", "answer_loss")])


def test_the_stops_answering_scenario_is_flagged_by_the_answer_loss_rule(runs):
    result = evaluate(runs, HealthThresholds())
    delays = result["delays"][("stops_answering", "rlce", "answer_loss")]
    assert all(d is not None and 0 <= d <= 5 for d in delays)
    assert result["total"]["false"]["answer_loss"] == 0
