"""Variation share and reversal rates on hand-computed groups."""

import pytest

from rlce_trl.analysis.reversals import reversal_counts, reversal_rate, wrong_preferences
from rlce_trl.analysis.variation import pairwise_ordering, variation_share, variation_split

# (rewards, correct, SS_between, SS_total)
SPLITS = [
    # rewards exactly follow correctness: all variation is between the classes
    ([1.0, 0.0, 1.0, 0.0], [True, False, True, False], 1.0, 1.0),
    # mean .5; correct mean .5, incorrect mean .5: no variation between classes
    ([1.0, 0.0, 0.0, 1.0], [True, True, False, False], 0.0, 1.0),
    # mean .25, total = .5625 + 3 * .0625 = .75; between = 1 * (.75)^2 + 3 * (.25)^2 = .75
    ([1.0, 0.0, 0.0, 0.0], [True, False, False, False], 0.75, 0.75),
    # rubric-like: correct {.8, .6}, incorrect {.4, .2}; mean .5; total .09+.01+.01+.09 = .2; between 2*.04+2*.04=.16
    ([0.8, 0.6, 0.4, 0.2], [True, True, False, False], 0.16, 0.2),
    # None = no reward = 0
    ([None, None, None], [True, False, False], 0.0, 0.0),
    # everything correct: all variation is within the class
    ([0.5, 0.0], [True, True], 0.0, 0.125),
]


@pytest.mark.parametrize("rewards,correct,between,total", SPLITS)
def test_variation_split(rewards, correct, between, total):
    assert variation_split(rewards, correct) == pytest.approx((between, total))


def test_variation_share_pools_and_skips_groups_without_variation():
    share = variation_share([(r, c) for r, c, _, _ in SPLITS])
    # groups with variation: 1/1, 0/1, .75/.75, .16/.2, 0/.125 -> pooled 1.91 / 3.075
    assert share.pooled == pytest.approx((1 + 0 + 0.75 + 0.16 + 0) / (1 + 1 + 0.75 + 0.2 + 0.125))
    assert share.mean == pytest.approx((1 + 0 + 1 + 0.8 + 0) / 5)
    assert (share.groups, share.considered) == (5, 6)
    assert variation_share([]).pooled is None
    with pytest.raises(ValueError):
        variation_split([1.0], [True, False])


def test_pairwise_ordering():
    assert pairwise_ordering([0.8, 0.6, 0.4, 0.9], [True, True, False, False]) == (4, 2, 2)
    assert pairwise_ordering([None, None], [True, False]) == (1, 0, 0)


# (reference rewards, method rewards, correct, wrong preferences, reversed)
REVERSALS = [
    # USC picks the wrong majority (rollouts 1, 2); the method rewards both correct rollouts over both wrong ones
    ([0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 1.0], [True, False, False, True], 4, 4),
    # rewarding only one of the two correct rollouts reverses half of the wrong preferences
    ([0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0], [True, False, False, True], 4, 2),
    # the method ties (no reward): nothing reversed
    ([0.0, 1.0, 1.0, 0.0], [None, None, None, None], [True, False, False, True], 4, 0),
    # the method ranks correct rollout 0 above rollout 1 only
    ([0.0, 1.0, 1.0], [0.5, 0.25, 0.75], [True, False, False], 2, 1),
    # reference gives no reward (USC tie): no preference, no case
    ([None, None], [1.0, 0.0], [True, False], 0, 0),
    # reference prefers the correct rollout: no case
    ([1.0, 0.0], [0.0, 1.0], [True, False], 0, 0),
]


@pytest.mark.parametrize("reference,method,correct,cases,reversed_", REVERSALS)
def test_reversal_counts(reference, method, correct, cases, reversed_):
    assert reversal_counts(reference, method, correct) == (cases, reversed_)


def test_reversal_rate_pooled_and_per_group():
    rate = reversal_rate([(r, m, c) for r, m, c, _, _ in REVERSALS])
    assert (rate.cases, rate.reversed, rate.groups) == (14, 7, 4)
    assert rate.rate == pytest.approx(0.5) and rate.group_rate == pytest.approx((1 + 0.5 + 0 + 0.5) / 4)
    assert wrong_preferences([0.0, 1.0], [True, False]) == [(0, 1)]
    assert reversal_rate([]).rate is None
