"""The absolute learning-signal verdict (`rlce_trl.health.signal`): pure functions, no model."""

from collections import Counter

import pytest

from rlce_trl.health import GroupSummary, group_signal, signal_verdict


def test_signal_when_some_group_rewards_differ():
    verdict = signal_verdict(1.0, 0.5, 0.25, Counter(yes=3, no=1))
    assert verdict.has_signal and verdict.cause is None
    assert verdict.line.startswith("learning signal: answered 100% of rollouts, 50% of groups with 2+ answers, 25%")


@pytest.mark.parametrize(
    ("shares", "verdicts", "cause", "words"),
    [
        ((0.0, 0.0, 0.0), None, "no_answer", "does not write the answer format"),
        ((None, None, None), None, "no_answer", "does not write the answer format"),
        ((0.9, 0.0, 0.0), None, "one_answer", "same answer"),
        ((1.0, 0.5, 0.0), Counter(unknown=4, invalid=2), "verifier_abstained", "abstained on everything"),
        ((1.0, 0.5, 0.0), Counter(yes=2, unknown=2), "equal_rewards", "rewards do not differ"),
        ((1.0, 0.5, 0.0), None, "equal_rewards", "rewards do not differ"),
    ],
)
def test_no_signal_names_the_first_broken_link_and_a_fix(shares, verdicts, cause, words):
    verdict = signal_verdict(*shares, verdicts)
    assert not verdict.has_signal and verdict.cause == cause
    assert verdict.line.startswith("no learning signal: ") and words in verdict.line and "; fix: " in verdict.line
    assert "\n" not in verdict.line


def test_group_signal_reads_the_groups():
    silent = [GroupSummary([None] * 4, [0.0] * 4), GroupSummary(["a", None, "a", "a"], [0.0] * 4)]
    verdict = group_signal(silent)
    assert (verdict.has_signal, verdict.cause, verdict.answered_share, verdict.multi_answer_share) == (
        False, "one_answer", 3 / 8, 0.0)
    assert group_signal([GroupSummary([None] * 4, [None] * 4)]).cause == "no_answer"
    live = [*silent, GroupSummary(["a", "b", "a", "a"], [1.0, 0.0, 1.0, 1.0], verdicts=Counter(yes=2))]
    assert group_signal(live).has_signal and group_signal(live).spread_share == pytest.approx(1 / 3)
    assert group_signal([]).answered_share is None
