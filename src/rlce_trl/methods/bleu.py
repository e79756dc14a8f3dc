"""VisPlay's repetition penalty: sentence-BLEU distances and average-linkage clustering, in pure Python.

VisPlay's released reward (`train_examples/reward_function/cot_val.py`) computes `1 - sentence_bleu(...)` with NLTK
(method-1 smoothing, whitespace tokens, 4-gram uniform weights) and clusters with scikit-learn's
`AgglomerativeClustering(distance_threshold=0.5, linkage="average", metric="precomputed")`; each question is penalised
by the fraction of the batch in its cluster. Neither NLTK nor scikit-learn is a dependency here, so both are
reimplemented in pure Python ([`sentence_bleu`], [`average_linkage`]). [ours]: [`bleu_distances`] averages the BLEU
of both directions, where VisPlay fills the matrix from one direction only (hypothesis = the earlier question), which
makes the penalty depend on batch order.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Sequence

MAX_ORDER = 4
EPSILON = 0.1  # NLTK's SmoothingFunction(epsilon=0.1).method1


def _ngrams(tokens: Sequence[str]) -> list[Counter]:
    return [Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)) for n in range(1, MAX_ORDER + 1)]


def _bleu_from(overlaps: Sequence[int], hyp_len: int, ref_len: int) -> float:
    """BLEU of a hypothesis against one reference, from the clipped n-gram overlaps (`overlaps[n-1]`); a hypothesis
    of `hyp_len` tokens has `max(1, hyp_len - n + 1)` n-grams (NLTK's denominator)."""
    if hyp_len == 0 or overlaps[0] == 0:
        return 0.0
    log_sum = 0.0
    for n in range(MAX_ORDER):
        numerator = overlaps[n] if overlaps[n] else EPSILON
        log_sum += math.log(numerator / max(1, hyp_len - n)) / MAX_ORDER
    brevity = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    return brevity * math.exp(log_sum)


def _overlaps(a: Sequence[Counter], b: Sequence[Counter]) -> list[int]:
    """Clipped n-gram matches; symmetric in `a` and `b` (the sum of the smaller counts). No shared unigram: none."""
    out = []
    for n in range(MAX_ORDER):
        common = a[n].keys() & b[n].keys()
        if not common:
            return out + [0] * (MAX_ORDER - n)
        out.append(sum(min(a[n][gram], b[n][gram]) for gram in common))
    return out


def sentence_bleu(hypothesis: str, reference: str) -> float:
    """NLTK's `sentence_bleu(weights=(0.25,)*4, smoothing_function=SmoothingFunction().method1)` of `hypothesis`
    against one `reference`, whitespace tokens: clipped n-gram precisions, a zero score when no unigram matches,
    epsilon 0.1 added to the numerator of a zero higher-order precision, brevity penalty `exp(1 - r/c)`."""
    hyp, ref = hypothesis.split(), reference.split()
    return _bleu_from(_overlaps(_ngrams(hyp), _ngrams(ref)), len(hyp), len(ref))


def bleu_distances(sentences: Sequence[str]) -> list[list[float]]:
    """The matrix `1 - (sentence_bleu(s_i, s_j) + sentence_bleu(s_j, s_i)) / 2`, with 0 on the diagonal (VisPlay
    sets a question's BLEU with itself to 1)."""
    tokens = [s.split() for s in sentences]
    grams = [_ngrams(t) for t in tokens]
    n = len(sentences)
    dist = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            overlaps = _overlaps(grams[i], grams[j])
            forward = _bleu_from(overlaps, len(tokens[i]), len(tokens[j]))
            backward = _bleu_from(overlaps, len(tokens[j]), len(tokens[i]))
            dist[i][j] = dist[j][i] = 1.0 - (forward + backward) / 2
    return dist


def average_linkage(dist: Sequence[Sequence[float]], threshold: float = 0.5) -> list[int]:
    """Cluster labels (0, 1, ... in order of each cluster's first member) of average-linkage agglomerative clustering
    on a precomputed symmetric distance matrix, merging while the closest pair of clusters is strictly below
    `threshold` (as scikit-learn's `distance_threshold`). Ties merge the pair of lowest cluster ids first."""
    n = len(dist)
    members: dict[int, list[int]] = {i: [i] for i in range(n)}
    between: dict[tuple[int, int], float] = {}
    heap: list[tuple[float, int, int]] = []
    for i in range(n):
        for j in range(i + 1, n):
            between[(i, j)] = float(dist[i][j])
            if between[(i, j)] < threshold:
                heap.append((between[(i, j)], i, j))
    heapq.heapify(heap)
    new = n
    while heap:
        _, a, b = heapq.heappop(heap)
        if a not in members or b not in members:
            continue  # stale: one side was merged already
        group_a, group_b = members.pop(a), members.pop(b)
        for other in members:
            # Lance-Williams update for average linkage: the size-weighted mean of the two old distances.
            value = (len(group_a) * between.pop((min(a, other), max(a, other)))
                     + len(group_b) * between.pop((min(b, other), max(b, other)))) / (len(group_a) + len(group_b))
            between[(other, new)] = value
            if value < threshold:
                heapq.heappush(heap, (value, other, new))
        members[new] = group_a + group_b
        new += 1
    labels = [0] * n
    for label, group in enumerate(sorted(members.values(), key=min)):
        for i in group:
            labels[i] = label
    return labels


def cluster_shares(sentences: Sequence[str], threshold: float = 0.5) -> list[float]:
    """VisPlay's penalty: for each sentence, the fraction of all sentences that share its cluster."""
    if not sentences:
        return []
    labels = average_linkage(bleu_distances(sentences), threshold)
    sizes = Counter(labels)
    return [sizes[label] / len(sentences) for label in labels]
