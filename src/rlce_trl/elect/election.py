"""The Elect election (Elect paper §4.2, Eq. 13-19; thresholds from §5.1) as pure functions, no torch.

Per candidate o_i: S_i = 1/4 (s_fs + tau + (1 - rho) + c_i) (Eq. 16). Per canonical answer a: the soft consensus of
cited frames K(a) = argmax_K sum_i S_i J(K, K_i) (Eq. 17) and the score S(a) = sum_i S_i J(K_i, K(a)) (Eq. 18), after
discarding at most one maximal and one minimal S_i per cluster. Stop when the margin exceeds delta = 0.08 AND the
leader's mean confidence exceeds gamma = 0.4, else add samples up to K_max = 8. One referee check (Eq. 19) may hand
the win to the runner-up, in which case one extra sample is drawn and the election recomputed.

Where the paper is silent (CHANGELOG "Decisions"): trimming applies to clusters of >= 3 members and the consensus of
Eq. 17 is taken over the whole cluster (`trim="paper"`, `trim_consensus="before_18"`, the literal reading); J of two
empty sets is 0; ties go to the first-seen answer; with one cluster the margin is S(a*); the extra sample after a
referee flip is drawn even at K_max (so K <= K_max + 1); on a fixed pool with no sample left, Eq. 19's argmax is the
output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..evidence.votes import ranking
from .parsing import ElectParse, frame_sensitive_score, repetition_ratio, think_length, transparency_score

_EPS = 1e-12
TRIM_MODES = ("paper", "min4", "none")
TRIM_CONSENSUS = ("before_18", "before_17")


@dataclass(frozen=True)
class ElectConfig:
    """Election settings; defaults are the paper's (§5.1) or, where it is silent, ours."""

    delta: float = 0.08
    gamma: float = 0.4
    k_init: int = 3
    k_step: int = 1
    k_max: int = 8
    trim: str = "paper"
    trim_consensus: str = "before_18"
    use_frames: bool = True  # False: Elect-noframes, S_i = 1/3 (tau + 1 - rho + c_i) and J := 1
    think_range: tuple[int, int] = (64, 1024)
    ngram: int = 3
    tail_fraction: float = 0.25
    max_exact_frames: int = 16
    #: Terms averaged into S_i (Eq. 16): "fs", "tt", "ar", "conf". None: all four, or the last three without frames.
    #: Table 3's "w/o tran. & red." ablation is `terms=("fs",)`.
    terms: tuple[str, ...] | None = None

    def __post_init__(self):
        problems = []
        unknown = set(self.terms or ()) - {"fs", "tt", "ar", "conf"}
        if unknown or self.terms == ():
            problems.append(f"terms={self.terms}: use a non-empty subset of ('fs', 'tt', 'ar', 'conf')")
        if self.trim not in TRIM_MODES:
            problems.append(f"trim={self.trim!r}: use one of {TRIM_MODES}")
        if self.trim_consensus not in TRIM_CONSENSUS:
            problems.append(f"trim_consensus={self.trim_consensus!r}: use one of {TRIM_CONSENSUS}")
        if not 1 <= self.k_init <= self.k_max:
            problems.append(f"k_init={self.k_init}, k_max={self.k_max}: need 1 <= k_init <= k_max")
        if self.k_step < 1:
            problems.append(f"k_step={self.k_step}: use 1 or more")
        if self.think_range[0] >= self.think_range[1]:
            problems.append(f"think_range={self.think_range}: need lo < hi")
        if problems:
            raise ValueError("Invalid ElectConfig:\n  - " + "\n  - ".join(problems))


@dataclass(frozen=True)
class Candidate:
    """One parsed candidate: canonical answer (None: unparseable, no vote), cited frames K_i, score S_i, conf c_i."""

    answer: str | None
    keyframes: frozenset[int] = frozenset()
    score: float = 0.0
    confidence: float | None = None
    has_schema: bool = True


@dataclass
class Election:
    winner: str | None
    runner_up: str | None
    answer_scores: dict[str, float]
    consensus: dict[str, frozenset[int]]
    margin: float
    leader_confidence: float
    fallback: str | None = None  # None | "majority_no_schema" | "majority_zero_scores" | "no_answer"
    num_candidates: int = 0
    unparsed: int = 0
    trace: list = field(default_factory=list)


def jaccard(a: frozenset[int] | set[int], b: frozenset[int] | set[int]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def evidence_score(parse: ElectParse, confidence: float | None, cfg: ElectConfig = ElectConfig(),
                   tokenizer=None) -> float:
    """S_i of Eq. 16 (or the noframes variant). An unknown confidence is left out of the average [ours]."""
    names = cfg.terms or (("fs", "tt", "ar", "conf") if cfg.use_frames else ("tt", "ar", "conf"))
    values = []
    if "fs" in names:
        values.append(frame_sensitive_score(len(parse.keyframes), parse.invalid))
    if "tt" in names:
        values.append(transparency_score(think_length(parse.think, tokenizer), cfg.think_range))
    if "ar" in names:
        values.append(1.0 - repetition_ratio(parse.think, cfg.ngram))
    if "conf" in names and confidence is not None:
        values.append(confidence)
    return sum(values) / len(values) if values else 0.0


def consensus_keyframes(sets: Sequence[frozenset[int]], weights: Sequence[float],
                        max_exact: int = 16) -> frozenset[int]:
    """Eq. 17: the frame set maximizing sum_i w_i J(K, K_i). The optimum lies inside the union of the K_i (an uncited
    frame only grows unions), so subsets of the union are enumerated exactly (as bitmasks) when it has <= `max_exact`
    frames; above that, a greedy add/remove search. Ties: smallest set, then lexicographic."""
    universe = sorted(set().union(*sets)) if sets else []
    if not universe:
        return frozenset()
    if len(universe) <= max_exact:
        bit = {f: 1 << i for i, f in enumerate(universe)}
        masks = [sum(bit[f] for f in k) for k in sets]
        pairs = [(m, w) for m, w in zip(masks, weights, strict=True) if m and w]

        def members(mask: int) -> tuple[int, ...]:
            return tuple(f for f in universe if mask & bit[f])

        best_value, best_mask = None, 0
        for mask in range(1, 1 << len(universe)):
            value = sum(w * (mask & m).bit_count() / (mask | m).bit_count() for m, w in pairs)
            size, best_size = mask.bit_count(), best_mask.bit_count()
            if best_value is None or value > best_value + _EPS:
                best_value, best_mask = value, mask
            elif abs(value - best_value) <= _EPS and size <= best_size and (
                    (size, members(mask)) < (best_size, members(best_mask))):
                best_mask = mask  # a tie keeps the value found first
        return frozenset(members(best_mask))
    current: set[int] = set()
    value = 0.0
    while True:
        moves = [frozenset(current ^ {f}) for f in universe]
        scored = [(sum(w * jaccard(m, k) for k, w in zip(sets, weights, strict=True)), tuple(sorted(m)))
                  for m in moves]
        top_value, top = max(scored, key=lambda s: (s[0], -len(s[1])))
        if top_value <= value + _EPS:
            return frozenset(current)
        current, value = set(top), top_value


def trimmed_members(scores: Sequence[float], mode: str = "paper") -> list[int]:
    """Indices kept after discarding one maximal and one minimal S_i ("at most one", so only when >= 3 members with
    `paper`, >= 4 with `min4`; never with `none`). Ties: the last maximal and the first minimal are dropped."""
    n = len(scores)
    if mode == "none" or n < (3 if mode == "paper" else 4):
        return list(range(n))
    hi = max(range(n), key=lambda i: (scores[i], i))
    lo = min(range(n), key=lambda i: (scores[i], i))
    return [i for i in range(n) if i not in (hi, lo)]


def cluster_score(members: Sequence[Candidate], cfg: ElectConfig = ElectConfig()) -> tuple[float, frozenset[int]]:
    """(S(a), K(a)) of Eq. 17-18 for one answer cluster, with trimming per `cfg`."""
    kept = [members[i] for i in trimmed_members([c.score for c in members], cfg.trim)]
    if not cfg.use_frames:
        return sum(c.score for c in kept), frozenset()
    basis = members if cfg.trim_consensus == "before_18" else kept
    consensus = consensus_keyframes([c.keyframes for c in basis], [c.score for c in basis], cfg.max_exact_frames)
    return sum(c.score * jaccard(c.keyframes, consensus) for c in kept), consensus


def elect(candidates: Sequence[Candidate], cfg: ElectConfig = ElectConfig()) -> Election:
    """One election over the candidates seen so far (Eq. 17-18 plus the fallbacks)."""
    clusters: dict[str, list[Candidate]] = {}
    for c in candidates:
        if c.answer is not None:
            clusters.setdefault(c.answer, []).append(c)
    unparsed = sum(c.answer is None for c in candidates)
    if not clusters:
        return Election(None, None, {}, {}, 0.0, 0.0, "no_answer", len(candidates), unparsed)
    fallback = None
    scores: dict[str, float] = {}
    consensus: dict[str, frozenset[int]] = {}
    if cfg.use_frames and not any(c.has_schema for c in candidates):
        fallback = "majority_no_schema"
    else:
        for answer, members in clusters.items():
            scores[answer], consensus[answer] = cluster_score(members, cfg)
        if all(s <= _EPS for s in scores.values()):
            fallback = "majority_zero_scores"
    if fallback:  # a vote: the cluster sizes score, the margin is a share of the candidates
        scores = {a: float(len(m)) for a, m in clusters.items()}
    ranked = [answer for answer, _ in ranking(scores)]  # equal scores: the first-seen answer wins
    winner, runner_up = ranked[0], (ranked[1] if len(ranked) > 1 else None)
    margin = scores[winner] - (scores[runner_up] if runner_up else 0.0)
    if fallback:
        margin /= len(candidates)
    confs = [c.confidence for c in clusters[winner] if c.confidence is not None]
    leader_conf = sum(confs) / len(confs) if confs else 0.0
    return Election(winner, runner_up, scores, consensus, margin, leader_conf, fallback, len(candidates), unparsed)


def should_stop(election: Election, delta: float = 0.08, gamma: float = 0.4) -> bool:
    """Early stop (§4.2, §5.1): margin strictly above delta AND the leader's mean confidence strictly above gamma."""
    return election.winner is not None and election.margin > delta and election.leader_confidence > gamma


def apply_referee(election: Election, delta_adjust: float) -> str | None:
    """Eq. 19: argmax over {a*, a_(2)} of S(a) + 1{a = a*} Delta, with Delta <= 0; a* keeps ties."""
    if delta_adjust > 0:
        raise ValueError(f"the referee adjustment must be <= 0 (Eq. 19), got {delta_adjust}")
    if election.runner_up is None:
        return election.winner
    leader = election.answer_scores[election.winner] + delta_adjust
    return election.runner_up if election.answer_scores[election.runner_up] > leader + _EPS else election.winner


@dataclass
class ElectOutcome:
    answer: str | None
    election: Election
    num_samples: int
    referee_flip: bool = False
    stopped_early: bool = False


def run_election(draw: Callable[[int], Candidate | None], cfg: ElectConfig = ElectConfig(),
                 referee: Callable[[Election], float] | None = None, available: int | None = None) -> ElectOutcome:
    """The adaptive loop: draw k_init candidates, elect, stop when `should_stop`, else add k_step up to K_max; then
    one referee check (Eq. 19). `draw(i)` returns candidate i (candidate 0 is the conservative run) or `None` when
    no more exist; `available` caps the adaptive budget (the referee's extra sample is drawn whenever `draw` has
    one)."""
    cap = cfg.k_max if available is None else min(cfg.k_max, available)
    pool: list[Candidate] = []

    def grow(to: int) -> int:
        while len(pool) < to and (c := draw(len(pool))) is not None:
            pool.append(c)
        return len(pool)

    grow(min(cfg.k_init, cap))
    while True:
        result = elect(pool, cfg)
        stopped = should_stop(result, cfg.delta, cfg.gamma)
        before = len(pool)
        if stopped or before >= cap or grow(min(before + cfg.k_step, cap)) == before:  # done, or no sample left
            break
    outcome = ElectOutcome(result.winner, result, len(pool), False, stopped)
    if referee is None or not needs_referee(outcome):
        return outcome
    return referee_step(outcome, referee(result), lambda: grow(len(pool) + 1), pool, cfg)


def needs_referee(outcome: ElectOutcome) -> bool:
    """The referee runs on real elections with a runner-up (a fallback vote or a lone answer has nothing to check)."""
    e = outcome.election
    return e.winner is not None and e.runner_up is not None and not e.fallback


def referee_step(outcome: ElectOutcome, delta_adjust: float, grow: Callable[[], int], pool: list[Candidate],
                 cfg: ElectConfig = ElectConfig()) -> ElectOutcome:
    """Eq. 19 and its consequence: if the runner-up wins, draw one extra sample (`grow()` returns the new pool
    size; it may exceed K_max by one) and output the recomputed election's winner; when no sample is left (a fixed
    pool), Eq. 19's argmax is the output."""
    result = outcome.election
    final = apply_referee(result, delta_adjust)
    if final == result.winner:
        return outcome
    before = len(pool)
    if grow() > before:  # one extra sample even at K_max (the paper draws it unconditionally); none left: Eq. 19
        again = elect(pool, cfg)
        return ElectOutcome(again.winner, again, len(pool), True, outcome.stopped_early)
    return ElectOutcome(final, result, len(pool), True, outcome.stopped_early)
