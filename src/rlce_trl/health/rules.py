"""The alarm rules: thresholds, one small pure function per rule (its rule in its docstring), and the alarm."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from .metrics import pooled

#: Methods whose verified answer is chosen by evidence rather than by the vote: entrenchment is checked for them.
#: (For TTRL and the pseudo-label scorers the verified answer IS the majority by construction.)
ENTRENCHMENT_METHODS = ("rlce",)


# -- the rules ----------------------------------------------------------------------------------------------------
@dataclass
class HealthThresholds:
    """The thresholds of the alarm rules (override any of them with `health_thresholds`). Defaults tuned on the
    simulated runs of `benchmarks/health_simulation.py`. Each rule's `check_*` function below says how it uses its
    thresholds (table in `docs/health.md`)."""

    #: within-group collapse ([`check_within_group_collapse`])
    collapse_share: float = 0.7
    collapse_margin: float = 0.35
    #: cross-prompt collapse, closed labels ([`check_cross_prompt_collapse`])
    entropy_ratio: float = 0.5
    min_reference_entropy: float = 0.5
    #: cross-prompt collapse, free text ([`check_duplicate_collapse`])
    duplicate_rate: float = 0.5
    duplicate_margin: float = 0.25
    #: verifier drift ([`check_verifier_drift`])
    drift_tv: float = 0.25
    min_verdicts: int = 30
    #: answer loss ([`check_answer_loss`])
    answered_ratio: float = 0.5
    min_reference_answered: float = 0.2
    #: reward-vs-signal divergence ([`check_reward_signal_divergence`])
    divergence: float = 0.3
    #: entrenchment, RLCE ([`entrenchment_cusum`], [`check_entrenchment`])
    entrenchment_null: float = 0.7
    entrenchment_alt: float = 0.5
    entrenchment_cusum: float = 2.0
    #: the eligible groups a share needs to be trusted: the logged `health/verified_majority_share` pools older
    #: steps until it holds this many, and a smaller reference raises the entrenchment threshold
    #: ([`entrenchment_threshold`])
    min_groups: int = 40

    @classmethod
    def from_dict(cls, values: dict | None) -> HealthThresholds:
        """Defaults overridden by `values`; a `ValueError` naming the fix for an unknown name or a bad value."""
        problems = threshold_problems(values)
        if problems:
            raise ValueError("health_thresholds: " + " ".join(problems))
        return cls(**(values or {}))


_COUNTS = ("min_verdicts", "min_groups")
_MARGINS = ("collapse_margin", "duplicate_margin")
_RATIOS = ("entrenchment_null", "entrenchment_alt")
_SHARES = ("answered_ratio", "min_reference_answered")


def threshold_problems(values) -> list[str]:
    """What is wrong with a `health_thresholds` override (a dict of threshold names to numbers); [] when fine."""
    if values is None:
        return []
    if not isinstance(values, dict):
        return [f"must be a JSON object of threshold names to numbers, got {values!r}."]
    names = [f.name for f in dataclasses.fields(HealthThresholds)]
    problems = []
    for name, value in values.items():
        if name not in names:
            problems.append(f"unknown threshold {name!r}: use one of {', '.join(names)}.")
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            problems.append(f"{name}={value!r} must be a number.")
        elif name in _COUNTS and (value < 0 or value != int(value)):
            problems.append(f"{name}={value!r} must be a whole number >= 0.")
        elif name in _MARGINS and not -1 <= value <= 1:
            problems.append(f"{name}={value!r} must be in [-1, 1].")
        elif name in _SHARES and not 0 <= value <= 1:
            problems.append(f"{name}={value!r} must be in [0, 1].")
        elif name in _RATIOS and not 0 < value < 1:
            problems.append(f"{name}={value!r} must be in (0, 1) (a share of the reference's disagreement rate).")
        elif name not in _COUNTS and name not in _MARGINS and value < 0:
            problems.append(f"{name}={value!r} must be >= 0.")
    if not problems:
        null = values.get("entrenchment_null", HealthThresholds.entrenchment_null)
        alt = values.get("entrenchment_alt", HealthThresholds.entrenchment_alt)
        if alt >= null:
            problems.append(f"entrenchment_alt={alt!r} must be below entrenchment_null={null!r} (the entrenched "
                            "disagreement rate is the lower one).")
    return problems


@dataclass(frozen=True)
class Check:
    """One rule's verdict at one step: the metric it read, its value, the threshold it compared with."""

    rule: str
    metric: str
    value: float
    threshold: float
    fired: bool
    reference: float | None = None


def check_within_group_collapse(share: float, reference: float, t: HealthThresholds) -> Check:
    """Rule: within-group collapse when the one-answer share (window) is >= max(`collapse_share`, its reference +
    `collapse_margin`): most groups now give one answer, clearly more than the base model's groups did."""
    threshold = max(t.collapse_share, reference + t.collapse_margin)
    return Check("within_group_collapse", "health/one_answer_share", share, threshold, share >= threshold, reference)


def check_cross_prompt_collapse(entropy: float, reference: float, t: HealthThresholds) -> Check | None:
    """Rule (closed labels): cross-prompt collapse when the answer entropy pooled across prompts (window) is <=
    `entropy_ratio` x its reference, the reference being at least `min_reference_entropy` bits (else no check: a
    base model that already answers one label leaves nothing to lose): the policy answers the same few labels
    whatever the input."""
    if reference < t.min_reference_entropy:
        return None
    ratio = entropy / reference
    return Check("cross_prompt_collapse", "health/answer_entropy_ratio", ratio, t.entropy_ratio,
                 ratio <= t.entropy_ratio, 1.0)


def check_duplicate_collapse(rate: float, reference: float, t: HealthThresholds) -> Check:
    """Rule (free text): cross-prompt collapse when the near-duplicate rate across prompts (window) is >=
    max(`duplicate_rate`, its reference + `duplicate_margin`): different prompts get the same answer."""
    threshold = max(t.duplicate_rate, reference + t.duplicate_margin)
    return Check("cross_prompt_collapse", "health/near_duplicate_rate", rate, threshold, rate >= threshold, reference)


def check_verifier_drift(distance: float, n_window: int, n_reference: int, t: HealthThresholds) -> Check | None:
    """Rule: verifier drift when the total-variation distance between the verdict mix of the window and that of the
    reference is >= `drift_tv`, both holding at least `min_verdicts` verdicts (else no check)."""
    if n_window < t.min_verdicts or n_reference < t.min_verdicts:
        return None
    return Check("verifier_drift", "health/verdict_drift", distance, t.drift_tv, distance >= t.drift_tv, 0.0)


def check_answer_loss(share: float, reference: float, t: HealthThresholds) -> Check | None:
    """Rule: answer loss when the share of rollouts that give an answer (window) is <= `answered_ratio` x its
    reference, the reference being at least `min_reference_answered` (else no check: a base model that hardly answers
    leaves nothing to lose): the completions stop holding an answer (garbled or truncated text), which leaves every
    other rule without input."""
    if reference < t.min_reference_answered:
        return None
    threshold = t.answered_ratio * reference
    return Check("answer_loss", "health/answered_share", share, threshold, share <= threshold, reference)


def reward_signal_divergence(reward: float, reward_ref: float, signal: float, signal_ref: float) -> float:
    """min(task reward gain, signal-share loss) against the reference: positive only when the reward rose AND the
    share of groups with a usable comparison fell."""
    return min(reward - reward_ref, signal_ref - signal)


def check_reward_signal_divergence(divergence: float, t: HealthThresholds) -> Check:
    """Rule: reward-vs-signal divergence when [`reward_signal_divergence`] (window against reference) is >=
    `divergence`: the task reward rose by at least that much while the share of groups with a usable comparison
    fell by at least that much (rewards rise because there is nothing left to compare)."""
    return Check("reward_signal_divergence", "health/reward_signal_divergence", divergence, t.divergence,
                 divergence >= t.divergence, 0.0)


#: The reference disagreement rate the entrenchment CUSUM uses is clipped to this range: a warmup in which the
#: verified answer already (almost) always is the majority leaves a floor to test against, and one in which it
#: differs from the majority in more than half the groups (a few noisy warmup groups) is read as half.
REFERENCE_DISAGREEMENT = (0.05, 0.5)


#: A vote split's own reference rate is used once the reference holds this many eligible groups of that split;
#: below, the split falls back to the reference's pooled rate.
MIN_SPLIT_GROUPS = 10


def _disagreement(agree: int, eligible: int) -> float:
    rate = 1.0 - agree / eligible if eligible else REFERENCE_DISAGREEMENT[1]
    return min(max(rate, REFERENCE_DISAGREEMENT[0]), REFERENCE_DISAGREEMENT[1])


def entrenchment_cusum(stream, reference: dict, t: HealthThresholds) -> float:
    """Page's CUSUM of the verified-majority stream since the reference. `stream` holds, per step, the eligible
    groups by vote split ([`verified_majority_by_split`]: split -> (agreeing, eligible)); `reference` is the same
    for the reference steps pooled. Each split has its reference disagreement rate d (1 - its share, from its own
    reference groups when there are `MIN_SPLIT_GROUPS`, else from all of them; clipped to
    `REFERENCE_DISAGREEMENT`), and each eligible group adds the log-likelihood ratio of a disagreement rate
    `entrenchment_alt` x d against `entrenchment_null` x d (log(alt/null) when it disagrees, log((1-alt d)/(1-null
    d)) when it agrees); a step's sum is added and the total restarts at 0 whenever it would go below. Evidence pools
    across steps, so a few groups per step still add up, and healthy steps pull it back to 0. Comparing within a
    vote split keeps a policy that merely learns (more lopsided votes, which are right more often) from reading as
    entrenched."""
    everyone = pooled(reference)
    on_disagree = math.log(t.entrenchment_alt / t.entrenchment_null)

    def on_agree(split) -> float:
        counts = reference.get(split, (0, 0))
        d = _disagreement(*(counts if counts[1] >= MIN_SPLIT_GROUPS else everyone))
        return math.log((1 - t.entrenchment_alt * d) / (1 - t.entrenchment_null * d))

    total = 0.0
    for step in stream:
        total = max(0.0, total + sum(agree * on_agree(split) + (eligible - agree) * on_disagree
                                     for split, (agree, eligible) in step.items()))
    return total


def entrenchment_threshold(reference_groups: int, t: HealthThresholds) -> float:
    """`entrenchment_cusum`, raised by sqrt(`min_groups` / n) when the reference holds n < `min_groups` eligible
    groups: a reference share from few groups is noisy, and a reference that overstates the disagreement rate by
    chance would make a healthy run look entrenched (small batches)."""
    if reference_groups >= t.min_groups or reference_groups <= 0:
        return t.entrenchment_cusum
    return t.entrenchment_cusum * math.sqrt(t.min_groups / reference_groups)


def check_entrenchment(stream, reference: dict, t: HealthThresholds) -> Check:
    """Rule (RLCE): entrenchment when [`entrenchment_cusum`] of the eligible groups since the reference (several
    answers, a unique majority, a verified answer) reaches [`entrenchment_threshold`]: the verified answer now
    differs from the majority markedly less often than in the first steps, for groups whose votes split alike (the
    evidence only repeats the vote). The check reports the reference's pooled verified-majority share."""
    agree, eligible = pooled(reference)
    value = entrenchment_cusum(stream, reference, t)
    threshold = entrenchment_threshold(eligible, t)
    return Check("entrenchment", "health/entrenchment_cusum", value, threshold, value >= threshold,
                 agree / eligible if eligible else None)


def evaluate_rules(now: dict, ref: dict, logged: dict, method: str, t: HealthThresholds) -> list[Check]:
    """Every rule that applies, on the window metrics `now`, the reference `ref` and the logged `health/*` values
    (as [`HealthMonitor.add`] builds them)."""
    compared = [("one_answer_share", check_within_group_collapse), ("answered_share", check_answer_loss),
                ("answer_entropy", check_cross_prompt_collapse) if now["_closed"]
                else ("near_duplicate_rate", check_duplicate_collapse)]
    out: list[Check | None] = [check(now[key], ref[key], t) for key, check in compared
                               if now.get(key) is not None and ref.get(key) is not None]
    if "health/verdict_drift" in logged:
        out.append(check_verifier_drift(logged["health/verdict_drift"], sum(now["_verdicts"].values()),
                                        sum(ref["_verdicts"].values()), t))
    if "health/reward_signal_divergence" in logged:
        out.append(check_reward_signal_divergence(logged["health/reward_signal_divergence"], t))
    if method in ENTRENCHMENT_METHODS and ref["_eligible"]:
        out.append(check_entrenchment(now["_since_reference"], ref["_by_split"], t))
    return [c for c in out if c is not None]


# -- alarms -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Alarm:
    """The first firing of a rule in a run."""

    rule: str
    metric: str
    value: float
    threshold: float
    step: int
    reference: float | None = None

    @property
    def message(self) -> str:
        ref = "" if self.reference is None else f", reference {self.reference:.3f}"
        return (f"training health: {self.rule.replace('_', ' ')} at step {self.step}: {self.metric} = "
                f"{self.value:.3f} (threshold {self.threshold:.3f}{ref})")

    def record(self, stopped: bool = False) -> dict:
        return {"type": "health_alarm", "step": self.step, "rule": self.rule, "metric": self.metric,
                "value": self.value, "threshold": self.threshold, "reference": self.reference,
                "message": self.message, "stopped": stopped}
