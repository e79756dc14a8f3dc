"""The monitor: a `TrainerCallback` that computes the metrics per step, checks the rules and raises alarms; the
alarms file and the model card's section."""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Sequence

from transformers import TrainerCallback

from ..data.jsonl import append_jsonl, read_jsonl_lenient, truncate_jsonl
from .metrics import (
    StepRecord,
    answer_entropy,
    answered_share,
    near_duplicate_rate,
    one_answer_share,
    pooled,
    signal_share,
    summarize_group,
    task_reward,
    total_variation,
    verified_majority_by_split,
    zero_spread_share,
)
from .rules import (
    ENTRENCHMENT_METHODS,
    Alarm,
    Check,
    HealthThresholds,
    entrenchment_cusum,
    evaluate_rules,
    reward_signal_divergence,
)
from .signal import SignalVerdict, group_signal

logger = logging.getLogger(__name__)

HEALTH_FILE = "rlce_health.jsonl"
#: The logged `health/verified_majority_share` pools up to this many windows of steps to reach `min_groups` eligible
#: groups (the entrenchment rule itself reads every step since the reference).
MAX_POOL = 4


# -- the monitor --------------------------------------------------------------------------------------------------
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
        signal_patience: end the run cleanly when none of its first `signal_patience` steps had a learning signal
            ([`~rlce_trl.health.signal.signal_verdict`]; checkpoint saved, then the trainer raises
            `NoLearningSignalError`); 0: never (every step without signal is still logged).
        output_dir: where `rlce_health.jsonl` goes (`None`: no file).
        metrics: a `name -> list` mapping the metrics are appended to (`None`: not logged).
        evidence_log: an `audit.EvidenceLog` the alarms are appended to (`None`: not written).
        is_main: whether this process writes files and warnings.
    """

    def __init__(self, method: str = "rlce", thresholds: HealthThresholds | None = None, warmup: int = 3,
                 window: int = 3, stop: bool = False, output_dir: str | None = None, metrics=None,
                 evidence_log=None, is_main: bool = True, signal_patience: int = 0):
        if warmup < 1 or window < 1:
            raise ValueError("health_warmup_steps and health_window must be >= 1.")
        if signal_patience < 0:
            raise ValueError("health_signal_patience must be >= 0 (0 turns the no-signal stop off).")
        self.method = method
        self.thresholds = thresholds or HealthThresholds()
        self.warmup, self.window, self.stop = warmup, window, stop
        self.output_dir, self.metrics, self.evidence_log, self.is_main = output_dir, metrics, evidence_log, is_main
        self.records: list[StepRecord] = []
        self._by_split: list[dict] = []  # per record: its verified-majority counts by vote split
        self.pending: list[StepRecord] = []
        self.alarms: list[Alarm] = []
        self.history: list[dict] = []  # per step: the metrics
        self.stopped_by: Alarm | None = None
        self.signal_patience = signal_patience
        self.signals: list[tuple[int, SignalVerdict]] = []  # per record: its step and its learning-signal verdict
        #: the verdict of the step the no-signal stop ended the run at (`None`: it did not)
        self.stopped_without_signal: SignalVerdict | None = None
        self._reference: dict | None = None
        self._file_started = False
        self.last_inputs: tuple | None = None  # what the rules read at the last checked step

    # the trainer's side
    def observe(self, step: int, groups, results, verdicts: Counter | None = None) -> None:
        """Buffer one generation batch (every process sees all its groups); `verdicts`: the step's verdict counts
        over all processes (`StepStats.verdicts`: also the judgments of baselines whose results carry no tests)."""
        summaries = [summarize_group(g, r) for g, r in zip(groups, results, strict=True)]
        self.pending.append(StepRecord(step, summaries, Counter(verdicts) if verdicts is not None else None))

    def _window_metrics(self, records: Sequence[StepRecord]) -> dict:
        groups = [g for r in records for g in r.groups]
        closed = sum(g.closed for g in groups) * 2 >= len(groups)
        by_split = verified_majority_by_split(groups)
        verdicts = sum((r.verdict_mix() for r in records), Counter())
        out = {f.__name__: f(groups) for f in (one_answer_share, answered_share, zero_spread_share, signal_share,
                                               task_reward)}
        out.update(_closed=closed, _eligible=pooled(by_split)[1], _by_split=by_split, _verdicts=verdicts)
        if closed:
            out["answer_entropy"] = answer_entropy(groups)
        else:
            rates = [x for x in (near_duplicate_rate(r.groups) for r in records) if x is not None]
            out["near_duplicate_rate"] = sum(rates) / len(rates) if rates else None
        return out

    def add(self, record: StepRecord) -> tuple[dict[str, float], list[Check]]:
        """Take one step's record: its `health/*` metrics and the checks made (fired or not)."""
        self.records.append(record)
        self._by_split.append(verified_majority_by_split(record.groups))
        window = self.records[-self.window :]
        now = self._window_metrics(window)
        if len(self.records) == self.warmup:
            self._reference = self._window_metrics(self.records[: self.warmup])
        if self.method in ENTRENCHMENT_METHODS:  # pooled over as many recent steps as `min_groups` groups need
            agree, eligible = self._recent_agreement()
            now["verified_majority_share"] = agree / eligible if eligible else None
            now["_since_reference"] = tuple(self._by_split[self.warmup:])
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
            if self.method in ENTRENCHMENT_METHODS and ref["_eligible"]:
                logged["health/entrenchment_cusum"] = entrenchment_cusum(
                    now["_since_reference"], ref["_by_split"], self.thresholds)
        if ref is not None and len(self.records) >= self.warmup + self.window:
            self.last_inputs = (now, ref, logged)
            checks = evaluate_rules(now, ref, logged, self.method, self.thresholds)
            for check in checks:
                if check.fired and check.rule not in {a.rule for a in self.alarms}:
                    self.alarms.append(Alarm(check.rule, check.metric, check.value, check.threshold, record.step,
                                             check.reference))
        logged["health/alarms"] = float(sum(c.fired for c in checks))
        signal = group_signal(record.groups, record.verdict_mix())
        self.signals.append((record.step, signal))
        logged["health/step_signal"] = float(signal.has_signal)
        self.history.append({"step": record.step, **logged})
        return logged, checks

    def _recent_agreement(self) -> tuple[int, int]:
        """Verified-majority counts of the newest steps (at least `window`, after the warmup when there are enough),
        adding older steps until they hold `min_groups` eligible groups or reach `MAX_POOL` x `window` steps."""
        agree = eligible = 0
        first = self.warmup if len(self.records) >= self.warmup + self.window else 0
        for n, by_split in enumerate(self._by_split[first:][::-1][: MAX_POOL * self.window], 1):
            a, e = pooled(by_split)
            agree, eligible = agree + a, eligible + e
            if n >= self.window and eligible >= self.thresholds.min_groups:
                break
        return agree, eligible

    # the callback's side
    def on_train_begin(self, args, state, control, **kwargs):
        self._resume_step = state.global_step  # alarms of later steps in the file are dropped at the first write

    @property
    def had_signal(self) -> bool | None:
        """Whether any step seen had a learning signal (`None`: no step seen yet)."""
        return any(v.has_signal for _, v in self.signals) if self.signals else None

    def last_silent(self) -> tuple[int, SignalVerdict] | None:
        """The last step without a learning signal and its verdict (`None`: every step had one, or none ran)."""
        return next(((step, v) for step, v in reversed(self.signals) if not v.has_signal), None)

    def on_step_end(self, args, state, control, **kwargs):
        pending, self.pending = self.pending, []
        before, seen = len(self.alarms), len(self.signals)
        for record in pending:
            logged, _ = self.add(record)
            if self.metrics is not None:
                for name, value in logged.items():
                    self.metrics[name].append(value)
        signal_records = self._check_signal(state, control, self.signals[seen:])
        new = self.alarms[before:]
        if new and self.stop and self.stopped_by is None:
            self.stopped_by = new[0]
            # saving the checkpoint (and its model card) of the step the run stops at
            control.should_training_stop = control.should_save = control.should_log = True
        for alarm in new:
            if self.is_main:
                logger.warning(alarm.message + (" -- stopping the run (health_stop)." if alarm is self.stopped_by
                                                else ""))
        self._write([a.record(stopped=a is self.stopped_by) for a in new] + signal_records)
        return control

    def _check_signal(self, state, control, new: list[tuple[int, SignalVerdict]]) -> list[dict]:
        """Log every new step without a learning signal (one line: cause and fix) and, when no step since this run
        started has had one after `signal_patience` steps, stop the run. The records for `rlce_health.jsonl`: the
        steps without signal, and the first step with one."""
        records, first_signal = [], not any(v.has_signal for _, v in self.signals[: len(self.signals) - len(new)])
        for step, verdict in new:
            if not verdict.has_signal and self.is_main:
                logger.warning("step %d: %s", step, verdict.line)
            if first_signal or not verdict.has_signal:
                records.append(_signal_record(step, verdict))
            first_signal = first_signal and not verdict.has_signal
        steps_run = state.global_step - getattr(self, "_resume_step", 0)
        if (new and self.signal_patience and steps_run >= self.signal_patience and not self.had_signal
                and self.stopped_without_signal is None):
            self.stopped_without_signal = new[-1][1]
            # saving the checkpoint (and its model card) of the step the run stops at
            control.should_training_stop = control.should_save = control.should_log = True
            records[-1]["stopped"] = True
            if self.is_main:
                logger.warning("No step of the first %d had a learning signal: stopping the run "
                               "(health_signal_patience: 0 turns this off).", steps_run)
        return records

    def _write(self, records: list[dict]) -> None:
        if not self.is_main:
            return
        if self.output_dir is not None and (records or not self._file_started):
            path = os.path.join(self.output_dir, HEALTH_FILE)
            if not self._file_started:  # a fresh run drops earlier alarms, a resumed one those after its step
                self._file_started = True
                resume_step = getattr(self, "_resume_step", 0)
                truncate_jsonl(path, lambda r: (_is(r, "alarm") or _is(r, "signal")) and r["step"] <= resume_step)
            append_jsonl(records, path)
        alarms = [r for r in records if _is(r, "alarm")]  # the trail holds the alarms; the signal lines stay here
        if self.evidence_log is not None and alarms:
            self.evidence_log.write(alarms)


def _is(record: dict, kind: str) -> bool:
    return record.get("type") == f"health_{kind}" and isinstance(record.get("step"), int)


def _read(path: str, kind: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    return [record for record in read_jsonl_lenient(path, "health alarms file")[0] if _is(record, kind)]


def read_alarms(path: str) -> list[dict]:
    """The alarm records of a `rlce_health.jsonl` (unreadable lines skipped); [] when there is no file."""
    return _read(path, "alarm")


def _signal_record(step: int, verdict: SignalVerdict) -> dict:
    return {"type": "health_signal", "step": step, "has_signal": verdict.has_signal, "cause": verdict.cause,
            "line": verdict.line, "stopped": False}


def read_signal(path: str) -> list[dict]:
    """The learning-signal records of a `rlce_health.jsonl` (steps without signal, the first step with one, the
    stop); [] when there is no file."""
    return _read(path, "signal")


def no_signal_line(records: list[dict]) -> str | None:
    """The line of a run that never had a learning signal (its last step without one), from [`read_signal`]'s
    records; `None` when some step had signal or nothing was recorded."""
    if not records or any(r.get("has_signal") for r in records):
        return None
    return str(records[-1].get("line") or "no learning signal")


def card_section(monitor: HealthMonitor | None, steps: int) -> str:
    """The model card's "Training health" markdown: the alarms raised, and why the run stopped if it did."""
    if monitor is None:
        return ("### Training health\n\nThe training-health monitor was off for this run (`health_monitor: false`).\n")
    lines = ["### Training health", ""]
    silent = monitor.last_silent()
    if monitor.stopped_without_signal is not None:
        lines += [f"**Training was stopped at step {silent[0]}: no learning signal** in any of its first steps "
                  f"(`health_signal_patience: {monitor.signal_patience}`). {monitor.stopped_without_signal.line}.", ""]
    elif monitor.had_signal is False:
        lines += [f"**No learning signal**: no step of this run had one. {silent[1].line}.", ""]
    if monitor.stopped_by is not None:
        lines += [f"**Training was stopped early at step {monitor.stopped_by.step} by the training-health monitor "
                  f"(`health_stop: true`)**: {monitor.stopped_by.message}.", ""]
    if monitor.alarms:
        lines += ["Alarms raised during training (rules in `rlce_trl.health`):", ""]
        lines += [f"- step {a.step}: {a.rule.replace('_', ' ')}: `{a.metric}` = {a.value:.3f} (threshold "
                  f"{a.threshold:.3f})" for a in monitor.alarms]
    else:
        rules = "collapse, verifier drift, reward-vs-signal divergence, answer loss"
        if monitor.method in ENTRENCHMENT_METHODS:
            rules += ", entrenchment"
        lines.append(f"The training-health monitor raised no alarm over {steps} steps ({rules}).")
    return "\n".join(lines) + "\n"
