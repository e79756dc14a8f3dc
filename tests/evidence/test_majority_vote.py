"""The one majority vote: tally, ranking, leaders, and the two tie rules."""

import pytest

from rlce_trl.evidence.reward import rewards_for
from rlce_trl.evidence.votes import leaders, majority, ranking, tally, vote_counts


def test_tally_and_ranking_keep_first_appearance_among_equals():
    votes = ["b", None, "a", "a", "b", "c"]
    assert tally(votes) == {"b": 2, "a": 2, "c": 1} and list(tally(votes)) == ["b", "a", "c"]
    assert ranking(tally(votes)) == [("b", 2), ("a", 2), ("c", 1)]
    assert leaders(tally(votes)) == ["b", "a"] and leaders([0, 3, 1, 3]) == [1, 3]
    assert leaders({}) == [] and leaders([0, 0]) == []  # nobody voted
    assert vote_counts([2, None, 0, 2], 4) == [1, 0, 2, 0]


@pytest.mark.parametrize(
    "votes, first, none",
    [
        (["a", "b", "b"], "b", "b"),
        (["a", "b", "b", "a"], "a", None),  # a tie: the first given, or no majority
        ([None, "x", None], "x", "x"),
        ([None, None], None, None),
        ([], None, None),
    ],
)
def test_the_tie_rules(votes, first, none):
    assert majority(votes, tie="first") == first and majority(votes, tie="none") == none


def test_an_unknown_tie_rule_names_the_rules():
    with pytest.raises(ValueError, match="use one of first, none"):
        majority(["a"], tie="last")


def test_the_one_reward_rule():
    assert rewards_for([0, None, 1, 0], [0]) == [1.0, 0.0, 0.0, 1.0]
    assert rewards_for([0, 1], []) == [0.0, 0.0] and rewards_for([0, 1, 2], {1, 2}) == [0.0, 1.0, 1.0]
