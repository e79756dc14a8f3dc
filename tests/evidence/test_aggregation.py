"""Eq. 3 / Eq. 4 on hand-computed cases. Tests are (favoured, against, verdict)."""

import pytest

from rlce_trl.evidence.aggregation import pointwise_winners, select_verified, unresolved_pairs, verification_scores
from rlce_trl.evidence.state import EvidenceTest


def make_tests(*triples):
    return [EvidenceTest(f, a, "t", v) for f, a, v in triples]


def test_eq3_two_answers():
    # A>B: yes, yes, no ; B>A: no, no, yes -> V(A) = 2/3 - 1/3, V(B) = 1/3 - 2/3
    tests = make_tests((0, 1, "yes"), (0, 1, "yes"), (0, 1, "no"), (1, 0, "no"), (1, 0, "no"), (1, 0, "yes"))
    assert verification_scores(2, tests) == pytest.approx([1 / 3, -1 / 3])
    assert select_verified(verification_scores(2, tests)) == [0]


def test_eq3_abstentions_leave_the_means():
    # A>B: yes, unknown, unreadable(None) ; B>A: unknown, no -> V(A) = 1/1 - 0/1 = 1, V(B) = 0/1 - 1/1 = -1
    tests = make_tests((0, 1, "yes"), (0, 1, "unknown"), (0, 1, None), (1, 0, "unknown"), (1, 0, "no"))
    assert verification_scores(2, tests) == [1.0, -1.0]


def test_eq3_three_answers_supporting_and_contradicting_sets():
    # T+(A) = {A>B yes, A>C no}; T-(A) = {B>A no, C>A no}  -> 1/2 - 0 = 0.5
    # T+(B) = {B>A no, B>C yes}; T-(B) = {A>B yes, C>B yes} -> 1/2 - 1 = -0.5
    # T+(C) = {C>A no, C>B yes}; T-(C) = {A>C no, B>C yes}  -> 1/2 - 1/2 = 0
    tests = make_tests(
        (0, 1, "yes"), (1, 0, "no"), (0, 2, "no"), (2, 0, "no"), (1, 2, "yes"), (2, 1, "yes"),
    )
    assert verification_scores(3, tests) == pytest.approx([0.5, -0.5, 0.0])
    assert select_verified(verification_scores(3, tests)) == [0]


def test_all_abstaining_gives_no_scores_and_no_winner():
    tests = make_tests((0, 1, "unknown"), (1, 0, None))
    assert verification_scores(2, tests) == [None, None]
    assert select_verified([None, None]) == []


def test_one_sided_evidence_counts_as_zero_for_the_missing_term():
    # only B>A survives, satisfied: V(A) = 0 - 1, V(B) = 1 - 0
    assert verification_scores(2, make_tests((0, 1, "unknown"), (1, 0, "yes"))) == [-1.0, 1.0]


def test_tie_and_unresolved_pairs():
    scores = [0.5, 0.5, -1.0]
    assert select_verified(scores) == [0, 1]
    assert unresolved_pairs([1, 0]) == [(0, 1), (1, 0)]


def test_pointwise_majority():
    assert pointwise_winners([2 / 3, 0.5, None, 1.0]) == [0, 3]
