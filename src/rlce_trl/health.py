"""Training health for label-free RL: notice collapse and entrenchment while the run goes on.

Label-free rewards can keep rising while the policy collapses onto one answer, or onto its own prior, and no gold
label notices during training. [`HealthMonitor`] (a `TrainerCallback`, on by default in `RLCEGRPOTrainer`) reads the
groups each step scored and logs under `health/*`:

- `health/one_answer_share`: share of groups whose rollouts all give one answer (within-group collapse);
- `health/zero_spread_share`: share of groups whose task rewards do not vary (no GRPO advantage);
- `health/signal_share`: share of groups with a usable comparison (two or more answers, rewards that differ);
- `health/task_reward`: mean task reward (the group scorer's, format reward excluded);
- `health/answer_entropy`, `health/answer_entropy_ratio` (closed labels): entropy (bits) of the answers pooled
  across prompts, and its ratio to the first steps' (cross-prompt collapse);
- `health/near_duplicate_rate` (free text): share of answer pairs from different prompts that are near-duplicates
  (cross-prompt collapse);
- `health/verdict_drift`: total-variation distance between the verdict mix and the first steps' (verifier drift);
- `health/reward_signal_divergence`: min(task reward gain, signal-share loss) against the first steps: positive
  only when both move;
- `health/verified_majority_share` (RLCE): share of groups with several answers whose verified answer is the group
  majority (entrenchment);
- `health/alarms`: number of rules that fire at this step.

Every value is computed over the last `window` steps pooled; the *reference* is the first `warmup` steps pooled
(the base model's behaviour). Rules are checked once `warmup + window` steps are in, so the two never overlap. Each
rule is a small pure function (`check_*`) with its rule in its docstring; the first step a rule fires raises an
[`Alarm`]: a warning naming the metric, its value and the step, written to the log, the evidence trail
(a `{"type": "health_alarm"}` line), `<output_dir>/rlce_health.jsonl` (which the run report shows) and the model
card. With `stop=True` the first alarm ends the run cleanly: a checkpoint is saved and the card says why.

The default thresholds ([`HealthThresholds`]) were tuned on simulated runs (`benchmarks/health_simulation.py`) and
checked on held-out seeds there.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from transformers import TrainerCallback

logger = logging.getLogger(__name__)

HEALTH_FILE = "rlce_health.jsonl"
#: Methods whose verified answer is chosen by evidence rather than by the vote: entrenchment is checked for them.
#: (For TTRL and the pseudo-label scorers the verified answer IS the majority by construction.)
ENTRENCHMENT_METHODS = ("rlce",)
#: The entrenchment rule pools up to this many windows of steps to reach `min_groups` eligible groups.
MAX_POOL = 4


# -- what the monitor reads ---------------------------------------------------------------------------------------
@dataclass
class GroupSummary:
    """One rollout group as the monitor sees it.

    Args:
        answers: each rollout's canonical answer (`None`: the rollout gave none).
        rewards: each rollout's task reward (`None`: the method gave the group no reward).
        verified_answer: the answer the method picked, if exactly one.
        verdicts: the verifier's verdicts on this group's evidence (`"yes"`, `"no"`, ...; `"none"` when abstained).
        closed: whether the task has a closed label set.
    """

    answers: list[str | None]
    rewards: list[float | None]
    verified_answer: str | None = None
    verdicts: Counter = field(default_factory=Counter)
    closed: bool = True

    @property
    def distinct(self) -> set[str]:
        return {a for a in self.answers if a is not None}

    @property
    def majority(self) -> str | None:
        """The answer most rollouts give, or `None` when there is none or several tie."""
        counts = Counter(a for a in self.answers if a is not None).most_common(2)
        if not counts or (len(counts) == 2 and counts[0][1] == counts[1][1]):
            return None
        return counts[0][0]


def summarize_group(group, result) -> GroupSummary:
    """A [`GroupSummary`] of a scored group (`rlce_trl.scoring.Group` and its `GroupResult`)."""
    answers = [None if a is None else result.answers[a] for a in result.assignment]
    verdicts = Counter()
    for test in result.tests or []:
        verdict = test.get("verdict") if isinstance(test, dict) else getattr(test, "verdict", None)
        if verdict is not None or getattr(test, "text", None) is not None:  # a built test; failed builds are skipped
            verdicts[str(verdict) if verdict is not None else "none"] += 1
    return GroupSummary(answers=answers, rewards=list(result.verified), verified_answer=result.verified_answer,
                        verdicts=verdicts, closed=bool(group.labels))


@dataclass
class StepRecord:
    """The groups of one generation batch, logged under `step`."""

    step: int
    groups: list[GroupSummary]
    #: the step's verdicts as the scorer counted them (`StepStats.verdicts`); `None`: those of the groups' tests
    verdicts: Counter | None = None

    def verdict_mix(self) -> Counter:
        return Counter(self.verdicts) if self.verdicts is not None else verdict_mix(self.groups)


# -- metrics: pure functions of group summaries --------------------------------------------------------------------
def _share(hits: int, total: int) -> float | None:
    return hits / total if total else None


def one_answer_share(groups: Sequence[GroupSummary]) -> float | None:
    """Share of groups in which every rollout gives the same answer (a rollout without an answer breaks unanimity;
    a group where no rollout answers is not unanimous)."""
    groups = [g for g in groups if g.answers]
    hits = sum(1 for g in groups if None not in g.answers and len(g.distinct) == 1)
    return _share(hits, len(groups))


def _spread(rewards: Sequence[float | None]) -> float:
    values = [r for r in rewards if r is not None and math.isfinite(r)]
    return max(values) - min(values) if values else 0.0


def zero_spread_share(groups: Sequence[GroupSummary]) -> float | None:
    """Share of groups whose task rewards do not vary (all equal, or no reward at all): no GRPO advantage."""
    groups = [g for g in groups if g.rewards]
    return _share(sum(1 for g in groups if _spread(g.rewards) == 0), len(groups))


def signal_share(groups: Sequence[GroupSummary]) -> float | None:
    """Share of groups with a usable comparison: two or more distinct answers and task rewards that differ."""
    groups = [g for g in groups if g.rewards]
    return _share(sum(1 for g in groups if len(g.distinct) >= 2 and _spread(g.rewards) > 0), len(groups))


def task_reward(groups: Sequence[GroupSummary]) -> float | None:
    """Mean task reward over the rollouts that got one."""
    values = [r for g in groups for r in g.rewards if r is not None and math.isfinite(r)]
    return sum(values) / len(values) if values else None


def entropy_bits(counts: Counter) -> float | None:
    """Shannon entropy (bits) of a count distribution; `None` when it is empty."""
    total = sum(counts.values())
    if not total:
        return None
    return -sum(c / total * math.log2(c / total) for c in counts.values() if c) + 0.0


def answer_entropy(groups: Sequence[GroupSummary]) -> float | None:
    """Entropy (bits) of the answers of all rollouts pooled across prompts (rollouts without an answer left out).
    A policy that answers the same label whatever the input drives it towards 0."""
    return entropy_bits(Counter(a for g in groups for a in g.answers if a is not None))


def _words(text: str) -> frozenset[str]:
    return frozenset(text.lower().split())


def jaccard(a: frozenset, b: frozenset) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def near_duplicate_rate(groups: Sequence[GroupSummary], similarity: float = 0.8) -> float | None:
    """Free text: for every pair of groups (different prompts), the share of their rollout pairs whose answers are
    near-duplicates (word-set Jaccard similarity >= `similarity`, case-insensitive), averaged over the pairs of
    groups. `None` with fewer than two groups that answer."""
    bags = []
    for g in groups:
        counts = Counter(_words(a) for a in g.answers if a is not None)
        if counts:
            bags.append((counts, sum(counts.values())))
    if len(bags) < 2:
        return None
    cache: dict[tuple, bool] = {}

    def near(a, b) -> bool:
        key = (a, b) if hash(a) <= hash(b) else (b, a)
        if key not in cache:
            cache[key] = jaccard(a, b) >= similarity
        return cache[key]

    total, pairs = 0.0, 0
    for i in range(len(bags)):
        for j in range(i + 1, len(bags)):
            (ci, ni), (cj, nj) = bags[i], bags[j]
            total += sum(x * y for a, x in ci.items() for b, y in cj.items() if near(a, b)) / (ni * nj)
            pairs += 1
    return total / pairs


def verdict_mix(groups: Sequence[GroupSummary]) -> Counter:
    """The verdicts of all groups, pooled."""
    out: Counter = Counter()
    for g in groups:
        out.update(g.verdicts)
    return out


def total_variation(p: Counter, q: Counter) -> float | None:
    """Total-variation distance between two count distributions (0: same mix, 1: disjoint); `None` if one is
    empty."""
    np_, nq = sum(p.values()), sum(q.values())
    if not np_ or not nq:
        return None
    return 0.5 * sum(abs(p[k] / np_ - q[k] / nq) for k in set(p) | set(q))


def verified_majority_counts(groups: Sequence[GroupSummary]) -> tuple[int, int]:
    """(agreeing, eligible): eligible groups have two or more distinct answers, a unique majority and a verified
    answer; they agree when the verified answer is the majority."""
    eligible = [g for g in groups if len(g.distinct) >= 2 and g.verified_answer is not None and g.majority is not None]
    return sum(1 for g in eligible if g.verified_answer == g.majority), len(eligible)


# -- the rules ----------------------------------------------------------------------------------------------------
@dataclass
class HealthThresholds:
    """The thresholds of the alarm rules (override any of them with `health_thresholds`). Defaults tuned on the
    simulated runs of `benchmarks/health_simulation.py`."""

    #: within-group collapse: one-answer share at or above max(collapse_share, reference + collapse_margin)
    collapse_share: float = 0.7
    collapse_margin: float = 0.35
    #: cross-prompt collapse (closed labels): answer entropy at or below entropy_ratio x the reference entropy
    entropy_ratio: float = 0.5
    #: ... checked only when the reference entropy is at least this many bits (a base model that already answers
    #: one label leaves nothing to lose)
    min_reference_entropy: float = 0.5
    #: cross-prompt collapse (free text): near-duplicate rate at or above max(duplicate_rate, reference + margin)
    duplicate_rate: float = 0.5
    duplicate_margin: float = 0.25
    #: verifier drift: total-variation distance of the verdict mix from the reference at or above drift_tv ...
    drift_tv: float = 0.25
    #: ... with at least this many verdicts in the window and in the reference
    min_verdicts: int = 30
    #: reward-vs-signal divergence: min(reward gain, signal-share loss) at or above this
    divergence: float = 0.3
    #: entrenchment (RLCE): verified-majority share at or above max(entrenchment_share, reference + margin) ...
    entrenchment_share: float = 0.9
    entrenchment_margin: float = 0.05
    #: ... over at least this many eligible groups: older steps are pooled until there are (at most 4 windows)
    min_groups: int = 40

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls, values: dict | None) -> HealthThresholds:
        """Defaults overridden by `values`; a `ValueError` naming the fix for an unknown name or a bad value."""
        problems = threshold_problems(values)
        if problems:
            raise ValueError("health_thresholds: " + " ".join(problems))
        return cls(**(values or {}))


_COUNTS = ("min_verdicts", "min_groups")
_MARGINS = ("collapse_margin", "duplicate_margin", "entrenchment_margin")


def threshold_problems(values) -> list[str]:
    """What is wrong with a `health_thresholds` override (a dict of threshold names to numbers); [] when fine."""
    if values is None:
        return []
    if not isinstance(values, dict):
        return [f"must be a JSON object of threshold names to numbers, got {values!r}."]
    names = HealthThresholds.names()
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
        elif name not in _COUNTS and name not in _MARGINS and value < 0:
            problems.append(f"{name}={value!r} must be >= 0.")
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
    `entropy_ratio` x its reference, the reference being at least `min_reference_entropy` bits (else no check):
    the policy answers the same few labels whatever the input."""
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


def check_entrenchment(agree: int, eligible: int, reference: float, t: HealthThresholds) -> Check | None:
    """Rule (RLCE): entrenchment when, over at least `min_groups` eligible groups in the window (several answers, a
    unique majority, a verified answer), the share whose verified answer is the majority is >=
    max(`entrenchment_share`, its reference + `entrenchment_margin`): the evidence only repeats the vote."""
    if eligible < max(t.min_groups, 1):
        return None
    share = agree / eligible
    threshold = max(t.entrenchment_share, reference + t.entrenchment_margin)
    return Check("entrenchment", "health/verified_majority_share", share, threshold, share >= threshold, reference)


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


# -- the monitor --------------------------------------------------------------------------------------------------
def _pool(records: Iterable[StepRecord]) -> list[GroupSummary]:
    return [g for r in records for g in r.groups]


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def evaluate_rules(now: dict, ref: dict, logged: dict, method: str, t: HealthThresholds) -> list[Check]:
    """Every rule that applies, on the window metrics `now`, the reference `ref` and the logged `health/*` values
    (as [`HealthMonitor.add`] builds them)."""
    out: list[Check | None] = []
    if now["one_answer_share"] is not None and ref["one_answer_share"] is not None:
        out.append(check_within_group_collapse(now["one_answer_share"], ref["one_answer_share"], t))
    if now["_closed"]:
        if now.get("answer_entropy") is not None and ref.get("answer_entropy") is not None:
            out.append(check_cross_prompt_collapse(now["answer_entropy"], ref["answer_entropy"], t))
    elif now.get("near_duplicate_rate") is not None and ref.get("near_duplicate_rate") is not None:
        out.append(check_duplicate_collapse(now["near_duplicate_rate"], ref["near_duplicate_rate"], t))
    if "health/verdict_drift" in logged:
        out.append(check_verifier_drift(logged["health/verdict_drift"], sum(now["_verdicts"].values()),
                                        sum(ref["_verdicts"].values()), t))
    if "health/reward_signal_divergence" in logged:
        out.append(check_reward_signal_divergence(logged["health/reward_signal_divergence"], t))
    if method in ENTRENCHMENT_METHODS and ref["_eligible"]:
        out.append(check_entrenchment(now["_agree"], now["_eligible"], ref["_agree"] / ref["_eligible"], t))
    return [c for c in out if c is not None]


class HealthMonitor(TrainerCallback):
    """Computes the `health/*` metrics per step, checks the alarm rules and (with `stop=True`) ends the run.

    The trainer hands it each generation batch with [`observe`]; at the end of the optimizer step it processes what
    came in ([`add`], the same code the simulation bench runs), appends the metrics to `metrics` (the trainer's
    `_metrics["train"]`, so they are logged with the step) and writes alarms.

    Args:
        method: the reward method (`"rlce"` checks entrenchment).
        thresholds: [`HealthThresholds`].
        warmup: steps pooled as the reference (the base model's behaviour).
        window: steps pooled for each check.
        stop: end the run cleanly at the first alarm (checkpoint saved, the model card says why).
        output_dir: where `rlce_health.jsonl` goes (`None`: no file).
        metrics: a `name -> list` mapping the metrics are appended to (`None`: not logged).
        evidence_log: an `audit.EvidenceLog` the alarms are appended to (`None`: not written).
        is_main: whether this process writes files and warnings.
    """

    def __init__(self, method: str = "rlce", thresholds: HealthThresholds | None = None, warmup: int = 3,
                 window: int = 3, stop: bool = False, output_dir: str | None = None, metrics=None,
                 evidence_log=None, is_main: bool = True):
        if warmup < 1 or window < 1:
            raise ValueError("health_warmup_steps and health_window must be >= 1.")
        self.method = method
        self.thresholds = thresholds or HealthThresholds()
        self.warmup, self.window, self.stop = warmup, window, stop
        self.output_dir, self.metrics, self.evidence_log, self.is_main = output_dir, metrics, evidence_log, is_main
        self.records: list[StepRecord] = []
        self.pending: list[StepRecord] = []
        self.alarms: list[Alarm] = []
        self.history: list[dict] = []  # per step: the metrics
        self.stopped_by: Alarm | None = None
        self._reference: dict | None = None
        self._file_started = False
        self.last_inputs: tuple | None = None  # what the rules read at the last checked step

    # the trainer's side
    def observe(self, step: int, groups, results, verdicts: Counter | None = None) -> None:
        """Buffer one generation batch (every process sees all its groups); `verdicts`: the step's verdict counts
        over all processes (`StepStats.verdicts`: also the judgments of baselines whose results carry no tests)."""
        summaries = [summarize_group(g, r) for g, r in zip(groups, results, strict=True)]
        self.pending.append(StepRecord(step, summaries, Counter(verdicts) if verdicts is not None else None))

    # the metrics of a window of steps
    def _window_metrics(self, records: Sequence[StepRecord]) -> dict:
        groups = _pool(records)
        closed = sum(g.closed for g in groups) * 2 >= len(groups)
        agree, eligible = verified_majority_counts(groups)
        verdicts = sum((r.verdict_mix() for r in records), Counter())
        out = {
            "one_answer_share": one_answer_share(groups),
            "zero_spread_share": zero_spread_share(groups),
            "signal_share": signal_share(groups),
            "task_reward": task_reward(groups),
            "_closed": closed,
            "_agree": agree,
            "_eligible": eligible,
            "_verdicts": verdicts,
        }
        if closed:
            out["answer_entropy"] = answer_entropy(groups)
        else:
            out["near_duplicate_rate"] = _mean(near_duplicate_rate(r.groups) for r in records)
        if self.method in ENTRENCHMENT_METHODS:
            out["verified_majority_share"] = agree / eligible if eligible else None
        return out

    def add(self, record: StepRecord) -> tuple[dict[str, float], list[Check]]:
        """Take one step's record: its `health/*` metrics and the checks made (fired or not)."""
        self.records.append(record)
        window = self.records[-self.window :]
        now = self._window_metrics(window)
        if len(self.records) == self.warmup:
            self._reference = self._window_metrics(self.records[: self.warmup])
        if self.method in ENTRENCHMENT_METHODS:  # pooled over as many recent steps as `min_groups` groups need
            now["_agree"], now["_eligible"] = self._recent_agreement()
            now["verified_majority_share"] = now["_agree"] / now["_eligible"] if now["_eligible"] else None
        ref = self._reference
        checks: list[Check] = []
        logged = {f"health/{k}": v for k, v in now.items() if not k.startswith("_") and v is not None}
        if ref is not None:
            if now.get("answer_entropy") is not None and ref.get("answer_entropy"):
                logged["health/answer_entropy_ratio"] = now["answer_entropy"] / ref["answer_entropy"]
            distance = total_variation(now["_verdicts"], ref["_verdicts"])
            if distance is not None:
                logged["health/verdict_drift"] = distance
            parts = (now["task_reward"], ref["task_reward"], now["signal_share"], ref["signal_share"])
            if None not in parts:
                logged["health/reward_signal_divergence"] = reward_signal_divergence(*parts)
        if ref is not None and len(self.records) >= self.warmup + self.window:
            self.last_inputs = (now, ref, logged)
            checks = evaluate_rules(now, ref, logged, self.method, self.thresholds)
            for check in checks:
                if check.fired and check.rule not in {a.rule for a in self.alarms}:
                    self.alarms.append(Alarm(check.rule, check.metric, check.value, check.threshold, record.step,
                                             check.reference))
        logged["health/alarms"] = float(sum(c.fired for c in checks))
        self.history.append({"step": record.step, **logged})
        return logged, checks

    def _recent_agreement(self) -> tuple[int, int]:
        """Verified-majority counts of the newest steps (at least `window`, after the warmup when there are enough),
        adding older steps until they hold `min_groups` eligible groups or reach `MAX_POOL` x `window` steps."""
        agree = eligible = 0
        first = self.warmup if len(self.records) >= self.warmup + self.window else 0
        recent = self.records[first:][::-1][: MAX_POOL * self.window]
        for n, record in enumerate(recent, 1):
            a, e = verified_majority_counts(record.groups)
            agree, eligible = agree + a, eligible + e
            if n >= self.window and eligible >= self.thresholds.min_groups:
                break
        return agree, eligible

    # the callback's side
    def on_train_begin(self, args, state, control, **kwargs):
        self._resume_step = state.global_step  # alarms of later steps in the file are dropped at the first write

    def on_step_end(self, args, state, control, **kwargs):
        pending, self.pending = self.pending, []
        before = len(self.alarms)
        for record in pending:
            logged, _ = self.add(record)
            if self.metrics is not None:
                for name, value in logged.items():
                    self.metrics[name].append(value)
        new = self.alarms[before:]
        if new and self.stop and self.stopped_by is None:
            self.stopped_by = new[0]
            control.should_training_stop = True
            control.should_save = True  # the checkpoint (and its model card) of the step the run stops at
            control.should_log = True
        for alarm in new:
            if self.is_main:
                logger.warning(alarm.message + (" -- stopping the run (health_stop)." if alarm is self.stopped_by
                                                else ""))
        self._write([a.record(stopped=a is self.stopped_by) for a in new])
        return control

    def _write(self, records: list[dict]) -> None:
        if not self.is_main:
            return
        if self.output_dir is not None and (records or not self._file_started):
            path = os.path.join(self.output_dir, HEALTH_FILE)
            if not self._file_started:  # a fresh run drops earlier alarms, a resumed one those after its step
                self._file_started = True
                keep = [r for r in read_alarms(path) if r["step"] <= getattr(self, "_resume_step", 0)]
                os.makedirs(self.output_dir, exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    f.writelines(json.dumps(r) + "\n" for r in keep)
            if records:
                with open(path, "a", encoding="utf-8") as f:
                    f.writelines(json.dumps(r) + "\n" for r in records)
        if self.evidence_log is not None and records:
            self.evidence_log.write(records)


def read_alarms(path: str) -> list[dict]:
    """The alarm records of a `rlce_health.jsonl` (unreadable lines skipped); [] when there is no file."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("type") == "health_alarm" \
                    and isinstance(record.get("step"), int):
                out.append(record)
    return out


def card_section(monitor: HealthMonitor | None, steps: int) -> str:
    """The model card's "Training health" markdown: the alarms raised, and why the run stopped if it did."""
    if monitor is None:
        return ("### Training health\n\nThe training-health monitor was off for this run (`health_monitor: false`).\n")
    lines = ["### Training health", ""]
    if monitor.stopped_by is not None:
        lines += [f"**Training was stopped early at step {monitor.stopped_by.step} by the training-health monitor "
                  f"(`health_stop: true`)**: {monitor.stopped_by.message}.", ""]
    if monitor.alarms:
        lines.append("Alarms raised during training (rules in `rlce_trl.health`):")
        lines.append("")
        lines += [f"- step {a.step}: {a.rule.replace('_', ' ')}: `{a.metric}` = {a.value:.3f} (threshold "
                  f"{a.threshold:.3f})" for a in monitor.alarms]
    else:
        lines.append(f"The training-health monitor raised no alarm over {steps} steps (collapse, verifier drift, "
                     "reward-vs-signal divergence" + (", entrenchment" if monitor.method in ENTRENCHMENT_METHODS
                                                      else "") + ").")
    return "\n".join(lines) + "\n"
