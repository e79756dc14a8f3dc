"""VisPlay's repetition penalty: NLTK-equivalent sentence-BLEU (method 1) and average-linkage clustering, checked
against values computed by hand."""

import math

import pytest

from rlce_trl.methods.bleu import average_linkage, bleu_distances, cluster_shares, sentence_bleu

Q1 = "what is the speaker feeling"
Q2 = "what is the speaker feeling now"
Q3 = "why does the man laugh"
Q4 = "why does the man laugh loudly"


def test_sentence_bleu_by_hand():
    # Q1 against Q2: every n-gram of Q1 matches (precisions 1), brevity penalty exp(1 - 6/5)
    assert sentence_bleu(Q1, Q2) == pytest.approx(math.exp(-0.2))
    # Q2 against Q1: precisions 5/6, 4/5, 3/4, 2/3 -> geometric mean (1/3)^(1/4); no brevity penalty
    assert sentence_bleu(Q2, Q1) == pytest.approx((1 / 3) ** 0.25)
    # Q1 against Q3: only "the" matches; method-1 smoothing gives the empty orders 0.1 / count
    assert sentence_bleu(Q1, Q3) == pytest.approx((1 / 5 * 0.1 / 4 * 0.1 / 3 * 0.1 / 2) ** 0.25)
    # no unigram in common, or an empty hypothesis: 0
    assert sentence_bleu("alpha beta", "gamma delta") == 0.0
    assert sentence_bleu("", Q1) == 0.0
    assert sentence_bleu(Q1, Q1) == pytest.approx(1.0)


def test_distance_matrix_is_symmetric_with_zero_diagonal():
    dist = bleu_distances([Q1, Q2, Q3])
    assert [dist[i][i] for i in range(3)] == [0.0, 0.0, 0.0]
    assert dist[0][1] == dist[1][0] == pytest.approx(1 - (sentence_bleu(Q1, Q2) + sentence_bleu(Q2, Q1)) / 2)


def test_four_question_example():
    # Q3/Q4 are 5 and 6 tokens like Q1/Q2: d = 1 - (exp(-0.2) + (1/3)^(1/4)) / 2 = 0.211 for both pairs;
    # across the pairs only "the" matches, so d > 0.9
    dist = bleu_distances([Q1, Q3, Q2, Q4])
    assert dist[0][2] == dist[1][3] == pytest.approx(1 - (math.exp(-0.2) + (1 / 3) ** 0.25) / 2)
    assert min(dist[0][1], dist[0][3], dist[2][1], dist[2][3]) > 0.9
    assert average_linkage(dist, 0.5) == [0, 1, 0, 1]
    assert cluster_shares([Q1, Q3, Q2, Q4]) == [0.5, 0.5, 0.5, 0.5]
    # a fifth, unrelated question is a singleton: 1/5 of the batch
    assert cluster_shares([Q1, Q3, Q2, Q4, "how many people are present"]) == [0.4, 0.4, 0.4, 0.4, 0.2]


def test_average_linkage_is_not_single_or_complete_linkage():
    # a-b merge at 0.2; then c joins at the AVERAGE of 0.45 and 0.6 = 0.525 >= 0.5: no merge (single linkage would)
    assert average_linkage([[0, 0.2, 0.45], [0.2, 0, 0.6], [0.45, 0.6, 0]], 0.5) == [0, 0, 1]
    # average of 0.3 and 0.65 = 0.475 < 0.5: merge (complete linkage, at 0.65, would not)
    assert average_linkage([[0, 0.2, 0.3], [0.2, 0, 0.65], [0.3, 0.65, 0]], 0.5) == [0, 0, 0]
    # the threshold is strict, as scikit-learn's distance_threshold
    assert average_linkage([[0, 0.5], [0.5, 0]], 0.5) == [0, 1]
    assert average_linkage([], 0.5) == [] and cluster_shares([]) == []


def test_duplicates_cluster_together_and_order_does_not_matter():
    batch = [Q1, Q1, Q1, Q3]
    assert cluster_shares(batch) == [0.75, 0.75, 0.75, 0.25]
    assert cluster_shares(list(reversed(batch))) == [0.25, 0.75, 0.75, 0.75]
