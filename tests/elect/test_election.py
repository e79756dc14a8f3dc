"""The Elect election (paper §4.2, Eq. 13-19) against hand-computed values."""

import itertools
import random

import pytest

from rlce_trl.elect import (
    Candidate,
    ElectConfig,
    Election,
    apply_referee,
    cluster_score,
    consensus_keyframes,
    elect,
    evidence_score,
    frame_sensitive_score,
    jaccard,
    parse_elect_output,
    repetition_ratio,
    run_election,
    should_stop,
    tail_confidence,
    transparency_score,
    trimmed_members,
)

F = frozenset


def cand(answer, frames, score, conf=0.5):
    return Candidate(answer, F(frames), score, conf)


# -- the per-output scores (spec 1.2 test vectors) --------------------------------------------------------------------
@pytest.mark.parametrize("valid,invalid,expected",
                         [(1, 0, 0.5), (2, 0, 2 / 3), (3, 1, 0.5), (2, 3, 0.0), (8, 0, 8 / 9), (0, 0, 0.0)])
def test_frame_sensitive_vectors(valid, invalid, expected):
    assert frame_sensitive_score(valid, invalid) == pytest.approx(expected)


@pytest.mark.parametrize("length,expected", [(544, 1.0), (304, 0.5), (784, 0.5), (64, 0.0), (10, 0.0), (1024, 0.0),
                                             (5000, 0.0), (128, 0.0432), (400, 0.7939)])
def test_transparency_vectors(length, expected):
    assert transparency_score(length) == pytest.approx(expected, abs=1e-4)


def test_repetition_ratio():
    assert repetition_ratio("a b a b a b", n=2) == pytest.approx(0.6)
    assert repetition_ratio("a b", n=3) == 0.0  # no 3-gram: rho = 0 (Eq. 10)
    assert repetition_ratio("x y z x y z", n=3) == pytest.approx(1 - 3 / 4)


def test_tail_confidence_last_quarter():
    import math

    lps = [math.log(0.1)] * 6 + [math.log(0.8), math.log(0.6)]  # 8 tokens: last ceil(2) = 0.8, 0.6
    assert tail_confidence(lps) == pytest.approx(0.7)
    assert tail_confidence([math.log(0.5)] * 3) == pytest.approx(0.5)  # ceil(0.75) = 1 token
    assert tail_confidence([]) is None


def test_evidence_score_eq16():
    think = " ".join(f"w{i}" for i in range(544))
    text = f"<think>{think}</think><keyframes>2, 4</keyframes><answer>B</answer>"
    parse = parse_elect_output(text, num_frames=8, labels=["A", "B"])
    # s_fs = 2/3, tau = 1, 1 - rho = 1, c = 0.4
    assert evidence_score(parse, 0.4) == pytest.approx((2 / 3 + 1 + 1 + 0.4) / 4)
    assert evidence_score(parse, 0.4, ElectConfig(use_frames=False)) == pytest.approx((1 + 1 + 0.4) / 3)


# -- Eq. 17-18 and trimming ---------------------------------------------------------------------------------------
A = [cand("A", {3, 5}, 0.6), cand("A", {3, 5, 7}, 0.7), cand("A", {3, 5}, 0.8)]
B = [cand("B", {2, 9}, 0.6), cand("B", {2, 9}, 0.6)]


def test_cluster_scores_by_hand():
    assert cluster_score(A, ElectConfig(trim="none")) == (pytest.approx(0.6 + 0.7 * 2 / 3 + 0.8), F({3, 5}))
    # literal trim: consensus {3,5} from all three, Eq. 18 over the 0.7 member only: 0.7 * J({3,5,7},{3,5})
    score, consensus = cluster_score(A, ElectConfig(trim="paper"))
    assert consensus == F({3, 5}) and score == pytest.approx(0.7 * 2 / 3)
    # consensus over the trimmed cluster: {3,5,7}, so 0.7 * 1
    assert cluster_score(A, ElectConfig(trim_consensus="before_17"))[0] == pytest.approx(0.7)
    assert cluster_score(B, ElectConfig(trim="paper"))[0] == pytest.approx(1.2)  # 2 members: nothing trimmed


def test_literal_trimming_makes_three_lose_to_two():
    pool = [A[0], B[0], A[1], B[1], A[2]]
    untrimmed = elect(pool, ElectConfig(trim="none"))
    assert untrimmed.winner == "A" and untrimmed.answer_scores["A"] == pytest.approx(1.8667, abs=1e-4)
    literal = elect(pool, ElectConfig(trim="paper"))
    assert literal.winner == "B" and literal.runner_up == "A"
    assert literal.margin == pytest.approx(1.2 - 0.7 * 2 / 3)
    assert elect(pool, ElectConfig(trim="min4")).winner == "A"  # 3 members: min4 does not trim


def test_trimmed_members():
    assert trimmed_members([0.6, 0.7, 0.8]) == [1]
    assert trimmed_members([0.6, 0.7]) == [0, 1]
    assert trimmed_members([0.5, 0.5, 0.5, 0.5]) == [1, 2]  # first minimal, last maximal dropped
    assert trimmed_members([0.1, 0.9, 0.2], "min4") == [0, 1, 2]
    assert trimmed_members([0.1, 0.9, 0.2, 0.3], "none") == [0, 1, 2, 3]


def brute_force(sets, weights, T):
    best, best_value = (), 0.0
    for size in range(1, T + 1):
        for subset in itertools.combinations(range(1, T + 1), size):
            value = sum(w * jaccard(F(subset), k) for k, w in zip(sets, weights, strict=True))
            if value > best_value + 1e-12 or (abs(value - best_value) <= 1e-12 and (size, subset) < (len(best), best)):
                best, best_value = subset, value
    return F(best), best_value


def test_consensus_solver_matches_brute_force():
    rng = random.Random(0)
    for _ in range(200):
        T = rng.randint(1, 10)
        n = rng.randint(1, 5)
        sets = [F(f for f in range(1, T + 1) if rng.random() < 0.4) for _ in range(n)]
        weights = [rng.choice([0.25, 0.5, 0.75, rng.random()]) for _ in range(n)]
        expected, value = brute_force(sets, weights, T)
        got = consensus_keyframes(sets, weights)
        assert got == expected, (sets, weights)
        assert sum(w * jaccard(got, k) for k, w in zip(sets, weights, strict=True)) == pytest.approx(value)


def test_consensus_greedy_above_exact_limit_is_a_local_optimum():
    sets = [F(range(1, 21)), F(range(1, 11)), F(range(1, 11))]
    got = consensus_keyframes(sets, [1.0, 1.0, 1.0], max_exact=16)
    assert got == F(range(1, 11))  # 0.5 + 1 + 1 beats the full set's 1 + 0.5 + 0.5


def test_empty_citations_score_zero_and_fall_back_to_majority():
    pool = [Candidate("A", F(), 0.9, has_schema=False), Candidate("B", F(), 0.9, has_schema=False),
            Candidate("B", F(), 0.1, has_schema=False)]
    result = elect(pool)
    assert result.fallback == "majority_no_schema" and result.winner == "B"
    tie = elect([Candidate("A", F(), 0.5), Candidate("B", F(), 0.5)])  # schema present, all J = 0
    assert tie.fallback == "majority_zero_scores" and tie.winner == "A"  # first-seen on ties
    assert elect([Candidate(None), Candidate(None)]).fallback == "no_answer"


# -- stop rule and referee ----------------------------------------------------------------------------------------
def election(margin, conf):
    return Election("A", "B", {"A": 1.0, "B": 1.0 - margin}, {}, margin, conf)


def test_stop_rule_boundaries():
    assert not should_stop(election(0.08, 0.9))  # "exceeds": strict
    assert should_stop(election(0.081, 0.41))
    assert not should_stop(election(0.081, 0.40))
    one = elect([cand("A", {1}, 0.5, 0.9)])
    assert one.margin == pytest.approx(0.5) and should_stop(one)  # one cluster: margin = S(a*)


def test_referee_eq19():
    e = election(0.3, 0.9)  # S(A) = 1.0, S(B) = 0.7
    assert apply_referee(e, 0.0) == "A"
    assert apply_referee(e, -0.3) == "A"  # tie keeps a*
    assert apply_referee(e, -0.5) == "B"
    with pytest.raises(ValueError, match="<= 0"):
        apply_referee(e, 0.1)


def scripted(seq):
    calls = []

    def draw(i):
        calls.append(i)
        return seq[i] if i < len(seq) else None

    return draw, calls


def test_adaptive_loop_stops_early_and_caps():
    strong = [cand("A", {1, 2}, 0.8, 0.9)] * 8
    draw, calls = scripted(strong)
    out = run_election(draw)
    assert out.num_samples == 3 and out.stopped_early and calls == [0, 1, 2]
    split = [cand("A", {1}, 0.5), cand("B", {1}, 0.5)] * 6  # margin 0 or 0.5 alternating -> low confidence
    draw, calls = scripted([Candidate(c.answer, c.keyframes, c.score, 0.1) for c in split])
    out = run_election(draw)
    assert out.num_samples == 8 and not out.stopped_early and calls == list(range(8))


def test_referee_flip_draws_one_extra_sample():
    seq = [cand("A", {1}, 0.9, 0.1), cand("B", {1}, 0.6, 0.1), cand("C", {1}, 0.1, 0.1), cand("B", {1}, 0.6, 0.1)]
    draw, calls = scripted(seq)
    out = run_election(draw, ElectConfig(k_max=3), referee=lambda e: -e.answer_scores[e.winner])
    # at K_max the extra sample is still drawn (K = K_max + 1): B (0.6) joins B, which wins the recomputed election
    assert out.referee_flip and out.answer == "B" and out.num_samples == 4 and out.election.winner == "B"
    draw, calls = scripted(seq[:3])  # a fixed pool with nothing left: Eq. 19's argmax is the output
    out = run_election(draw, ElectConfig(k_max=3), referee=lambda e: -e.answer_scores[e.winner])
    assert out.referee_flip and out.answer == "B" and out.num_samples == 3 and out.election.winner == "A"
    draw, calls = scripted(seq)
    out = run_election(draw, ElectConfig(k_max=8, delta=10), referee=lambda e: -e.answer_scores[e.winner])
    # no early stop (delta=10): all 4 drawn, B leads (1.2 vs 0.9); the referee zeroes it, the pool is spent -> Eq. 19
    assert out.election.winner == "B" and out.answer == "A" and out.num_samples == 4 and out.referee_flip
    draw, calls = scripted(seq)
    out = run_election(draw, ElectConfig(k_max=8, gamma=0.0, delta=0.1), referee=lambda e: -e.answer_scores[e.winner])
    # stops at 3 (margin 0.3 > 0.1, conf 0.1 > 0), the referee flips to B, one extra sample (B) -> recomputed: B wins
    assert calls == [0, 1, 2, 3] and out.num_samples == 4 and out.answer == "B" and out.referee_flip
