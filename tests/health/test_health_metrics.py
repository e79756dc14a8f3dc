"""The health metrics and alarm rules on hand-computed inputs."""

import math
import random
from collections import Counter

import pytest

from rlce_trl.health import GroupSummary, HealthMonitor, HealthThresholds, StepRecord, threshold_problems
from rlce_trl.health.metrics import (
    answer_entropy,
    answered_share,
    near_duplicate_rate,
    one_answer_share,
    signal_share,
    summarize_group,
    task_reward,
    total_variation,
    verdict_mix,
    verified_majority_by_split,
    verified_majority_counts,
    zero_spread_share,
)
from rlce_trl.health.rules import (
    check_answer_loss,
    check_cross_prompt_collapse,
    check_duplicate_collapse,
    check_entrenchment,
    check_reward_signal_divergence,
    check_verifier_drift,
    check_within_group_collapse,
    entrenchment_cusum,
    reward_signal_divergence,
)
from rlce_trl.scoring import Group, GroupResult


def g(answers, rewards=None, verified=None, verdicts=None, closed=True):
    rewards = rewards if rewards is not None else [None] * len(answers)
    return GroupSummary(list(answers), list(rewards), verified, Counter(verdicts or {}), closed)


T = HealthThresholds()


def test_one_answer_share_counts_unanimous_groups_only():
    groups = [g("aaaa"), g("aaab"), g(["a", "a", None, "a"]), g([None] * 4)]
    assert one_answer_share(groups) == 0.25  # a missing answer breaks unanimity; no answer at all is not unanimous
    assert one_answer_share([]) is None


def test_answered_share_counts_rollouts_with_an_answer():
    assert answered_share([g("aaaa"), g(["a", None, None, "b"]), g([None] * 4)]) == pytest.approx(6 / 12)
    assert answered_share([g([])]) is None and answered_share([]) is None


def test_zero_spread_and_signal_share():
    groups = [
        g("aaaa", [1, 1, 1, 1]),  # one answer, no spread
        g("aabb", [1, 1, 0, 0]),  # a usable comparison
        g("aabb", [None] * 4),  # a tie: no reward, no spread
        g("abcd", [0, 0, 0, 0]),  # several answers but nothing rewarded: no spread
    ]
    assert zero_spread_share(groups) == 0.75
    assert signal_share(groups) == 0.25


def test_task_reward_ignores_missing_rewards():
    assert task_reward([g("aabb", [1, 1, 0, 0]), g("aaaa", [None] * 4), g("ab", [1, float("nan")])]) == 0.6
    assert task_reward([g("aa", [None, None])]) is None


def test_answer_entropy_in_bits_across_prompts():
    assert answer_entropy([g("ab"), g("cd")]) == pytest.approx(2.0)  # four labels, uniform
    assert answer_entropy([g("aa"), g("aa")]) == 0.0
    # 3 a, 1 b: -(3/4 log2 3/4 + 1/4 log2 1/4)
    assert answer_entropy([g(["a", "a", None]), g("ab")]) == pytest.approx(0.8112781)
    assert answer_entropy([g([None, None])]) is None


def test_near_duplicate_rate_compares_answers_of_different_prompts():
    same = "i do not know what the user wants"
    groups = [
        g([same, same, "likes tea very much today"], closed=False),
        g([same, "the user likes coffee", "the user likes coffee"], closed=False),
    ]
    # pairs across the two groups: 3 x 3 = 9, of which same-same: 2 x 1 = 2
    assert near_duplicate_rate(groups) == pytest.approx(2 / 9)
    # case and word order do not matter; a third group brings two more pairs of groups
    groups.append(g(["Wants User The What Know Not Do I", None], closed=False))
    assert near_duplicate_rate(groups) == pytest.approx((2 / 9 + 2 / 3 + 1 / 3) / 3)
    assert near_duplicate_rate(groups[:1]) is None


def test_total_variation_of_verdict_mixes():
    ref = verdict_mix([g("ab", verdicts={"yes": 2, "no": 2}), g("ab", verdicts={"unknown": 0})])
    assert ref == Counter(yes=2, no=2)
    assert total_variation(Counter(yes=3, no=1), ref) == pytest.approx(0.25)
    assert total_variation(Counter(unknown=5), ref) == pytest.approx(1.0)
    assert total_variation(Counter(), ref) is None


def test_verified_majority_counts():
    groups = [
        g("aab", verified="a"),  # agrees
        g("aab", verified="b"),  # disagrees
        g("aabb", verified="a"),  # no unique majority: not eligible
        g("aaaa", verified="a"),  # one answer: not eligible
        g("aab", verified=None),  # no verified answer: not eligible
    ]
    assert verified_majority_counts(groups) == (1, 2)


def test_summarize_group_reads_a_group_result():
    class Test:
        def __init__(self, verdict, text="a test"):
            self.verdict, self.text = verdict, text

    result = GroupResult(verified=[1.0, 0.0, 1.0, 0.0], status="verified", answers=["pos", "neg"],
                         scores=[1.0, -1.0], verified_answer="pos", assignment=[0, 1, 0, None],
                         tests=[Test("yes"), Test("no"), Test(None), Test(None, text=None)])
    summary = summarize_group(Group("ctx", ["x"] * 4, labels=("pos", "neg")), result)
    assert summary.answers == ["pos", "neg", "pos", None]
    assert summary.majority == "pos" and summary.closed
    assert summary.verdicts == Counter(yes=1, no=1, none=1)  # a test that was never built is no verdict


# -- the rules: each fires exactly past its stated threshold --------------------------------------------------------
def test_within_group_collapse_rule():
    assert not check_within_group_collapse(T.collapse_share - 0.01, 0.1, T).fired  # below the absolute level
    assert check_within_group_collapse(T.collapse_share, 0.1, T).fired
    high = check_within_group_collapse(0.9, 0.6, T)  # the base model was already unanimous often: ref + margin
    assert high.threshold == pytest.approx(0.6 + T.collapse_margin) and high.fired == (0.9 >= 0.6 + T.collapse_margin)
    assert not check_within_group_collapse(0.6 + T.collapse_margin - 0.01, 0.6, T).fired


def test_cross_prompt_collapse_rule():
    check = check_cross_prompt_collapse(0.9, 2.0, T)
    assert check.value == pytest.approx(0.45) and check.fired == (0.45 <= T.entropy_ratio)
    assert check_cross_prompt_collapse(2.0 * T.entropy_ratio, 2.0, T).fired
    assert not check_cross_prompt_collapse(1.9, 2.0, T).fired
    assert check_cross_prompt_collapse(0.0, 0.3, T) is None  # a base model that answers one label already


def test_duplicate_collapse_rule():
    assert check_duplicate_collapse(T.duplicate_rate, 0.0, T).fired
    assert not check_duplicate_collapse(T.duplicate_rate - 0.01, 0.0, T).fired
    assert not check_duplicate_collapse(0.6, 0.4, T).fired  # needs reference + margin


def test_verifier_drift_rule():
    assert check_verifier_drift(T.drift_tv, T.min_verdicts, T.min_verdicts, T).fired
    assert not check_verifier_drift(T.drift_tv - 0.01, 100, 100, T).fired
    assert check_verifier_drift(1.0, T.min_verdicts - 1, 100, T) is None  # too few verdicts to tell


def test_answer_loss_rule():
    check = check_answer_loss(0.3, 0.8, T)
    assert check.metric == "health/answered_share" and check.threshold == pytest.approx(T.answered_ratio * 0.8)
    assert check.fired == (0.3 <= T.answered_ratio * 0.8)
    assert check_answer_loss(0.0, 0.8, T).fired  # nothing answers any more
    assert not check_answer_loss(0.8, 0.8, T).fired
    assert check_answer_loss(0.0, T.min_reference_answered - 0.01, T) is None  # the base model hardly answered


def test_reward_signal_divergence_rule():
    assert reward_signal_divergence(0.9, 0.5, 0.2, 0.7) == pytest.approx(0.4)
    assert reward_signal_divergence(0.9, 0.5, 0.7, 0.7) == 0.0  # the signal did not fall
    assert check_reward_signal_divergence(T.divergence, T).fired
    assert not check_reward_signal_divergence(T.divergence - 0.01, T).fired


def test_entrenchment_rule():
    # reference: 60 % of the verified answers are the majority (d = 0.4); a step of 10 agreeing groups adds 10 x
    # log((1 - 0.2 x 0.4) / (1 - 0.7 x 0.4)), a disagreeing group log(0.2 / 0.7)
    t = HealthThresholds(entrenchment_null=0.7, entrenchment_alt=0.2, entrenchment_cusum=2.5, min_groups=20)
    ref = {(2, 4): (12, 20)}
    step = 10 * math.log(0.92 / 0.72)
    assert entrenchment_cusum([{(2, 4): (10, 10)}], ref, t) == pytest.approx(step)
    assert not check_entrenchment([{(2, 4): (10, 10)}], ref, t).fired  # 2.45: one step is not enough ...
    fired = check_entrenchment([{(2, 4): (10, 10)}, {(2, 4): (5, 5)}], ref, t)  # ... evidence pools across steps
    assert fired.fired and fired.value == pytest.approx(1.5 * step) and fired.metric == "health/entrenchment_cusum"
    assert fired.reference == 0.6 and fired.threshold == 2.5
    assert entrenchment_cusum([{(2, 4): (10, 10)}, {(2, 4): (0, 4)}], ref, t) == 0.0  # restarts at 0
    assert entrenchment_cusum([{(2, 4): (6, 10)}] * 30, ref, t) == 0.0  # the reference's own rate never accumulates
    assert entrenchment_cusum([], ref, t) == 0.0
    # the reference's disagreement rate is clipped: a verifier that never agreed with the vote reads as 0.5 ...
    assert entrenchment_cusum([{(2, 4): (10, 10)}], {(2, 4): (0, 20)}, t) == pytest.approx(10 * math.log(0.9 / 0.65))
    # ... one that always agreed as 0.05 (a floor to test against instead of a division by zero)
    assert entrenchment_cusum([{(2, 4): (10, 10)}], {(2, 4): (20, 20)}, t) == pytest.approx(
        10 * math.log(0.99 / 0.965))
    # a reference of fewer than min_groups eligible groups raises the threshold by sqrt(min_groups / n)
    assert check_entrenchment([], {(2, 4): (3, 5)}, t).threshold == pytest.approx(2.5 * 2)


def test_entrenchment_compares_groups_whose_votes_split_alike():
    # reference: 3-1 majorities agree with the verified answer 90 % of the time, 2-1-1 ones 50 %: 70 % pooled
    t = HealthThresholds(entrenchment_null=0.7, entrenchment_alt=0.4, entrenchment_cusum=2.5)
    ref = {(3, 4): (18, 20), (2, 4): (10, 20)}
    learning = [{(3, 4): (9, 10)}] * 20  # the policy learns: only 3-1 votes now, agreeing at their own 90 %
    assert check_entrenchment(learning, ref, t).value < 1.0  # not entrenched (pooled, 90 % vs 70 % would be)
    entrenched = [{(3, 4): (5, 5), (2, 4): (5, 5)}] * 3  # every verified answer copies the vote, in both splits
    assert check_entrenchment(entrenched, ref, t).fired
    # a split with fewer than MIN_SPLIT_GROUPS reference groups falls back to the pooled rate (d = 0.3)
    thin = {(3, 4): (18, 20), (2, 4): (10, 20), (4, 5): (1, 2)}
    expected = 10 * math.log((1 - 0.4 * 0.3) / (1 - 0.7 * 0.3))
    assert entrenchment_cusum([{(4, 5): (10, 10)}], thin, t) == pytest.approx(expected, rel=0.05)
    assert verified_majority_by_split([g("aaab", verified="a"), g("aabc", verified="b"), g("aabc", verified="a"),
                                       g("aabb", verified="a"), g("aaaa", verified="a")]) == {(2, 4): (1, 2),
                                                                                           (3, 4): (1, 1)}


def _slow_entrenchment_stream(seed: int, entrenched: bool, steps: int = 60, groups: int = 8):
    """Scripted RLCE steps: groups with a unique majority whose verified answer is the majority with probability
    0.6 (healthy); with `entrenched`, from step 10 on the verified answer copies the vote with a probability rising
    by 0.05 a step (0.5 at step 20, the onset)."""
    rng = random.Random(seed)
    out = []
    for step in range(1, steps + 1):
        copy = min(1.0, max(0.0, (step - 10) / 20)) if entrenched else 0.0
        out.append(StepRecord(step, [
            GroupSummary(["a", "a", "b", "c"], [1.0, 1.0, 0.0, 0.0],
                         "a" if rng.random() < copy or rng.random() < 0.6 else rng.choice("bc"))
            for _ in range(groups)]))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_entrenchment_rule_fires_on_slow_entrenchment_and_not_on_healthy_runs(seed):
    # 16 groups a step: at 8 the rule trades some false alarms for speed (benchmarks/health_simulation.py measures)
    healthy, slow = HealthMonitor("rlce"), HealthMonitor("rlce")
    for record in _slow_entrenchment_stream(seed, entrenched=False, groups=16):
        healthy.add(record)
    for record in _slow_entrenchment_stream(seed, entrenched=True, groups=16):
        slow.add(record)
    assert healthy.alarms == []
    assert [a.rule for a in slow.alarms] == ["entrenchment"]
    assert 14 <= slow.alarms[0].step <= 25  # not before the drift starts to show, within 5 steps of the onset


def test_threshold_overrides_are_checked():
    assert threshold_problems({"collapse_share": 0.9}) == []
    assert "unknown threshold 'colapse_share'" in threshold_problems({"colapse_share": 0.9})[0]
    assert threshold_problems({"min_groups": 2.5})[0].startswith("min_groups=2.5 must be a whole number")
    assert threshold_problems({"drift_tv": "high"}) == ["drift_tv='high' must be a number."]
    assert threshold_problems([1]) and threshold_problems({"collapse_margin": 2})
    with pytest.raises(ValueError, match="health_thresholds: unknown threshold"):
        HealthThresholds.from_dict({"nope": 1})
    assert HealthThresholds.from_dict({"drift_tv": 0.5}).drift_tv == 0.5
    assert threshold_problems({"answered_ratio": 1.5}) == ["answered_ratio=1.5 must be in [0, 1]."]
    assert threshold_problems({"entrenchment_alt": 1.2})[0].startswith("entrenchment_alt=1.2 must be in (0, 1)")
    problems = threshold_problems({"entrenchment_alt": 0.8})
    assert problems == ["entrenchment_alt=0.8 must be below entrenchment_null=0.7 (the entrenched disagreement rate "
                        "is the lower one)."]
