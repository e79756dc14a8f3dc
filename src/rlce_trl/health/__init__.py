"""Training health for label-free RL: notice collapse and entrenchment while the run goes on.

Label-free rewards can keep rising while the policy collapses onto one answer, or onto its own prior, and no gold
label notices during training. [`HealthMonitor`] (a `TrainerCallback`, on by default in `RLCEGRPOTrainer`) reads the
groups each step scored, logs `health/*` metrics (within-group and cross-prompt collapse, answer loss, verifier drift,
rewards rising while the usable comparisons fall, entrenchment), raises an [`Alarm`] the first step a rule fires
(compared with the run's own first steps), and stops a run that never had a learning signal
([`NoLearningSignalError`], judged in absolute terms by [`signal_verdict`]). `docs/health.md` lists every metric,
rule, default threshold and setting; each submodule's docstring says what it holds.
"""

from __future__ import annotations

from .metrics import GroupSummary, StepRecord, pooled
from .monitor import HEALTH_FILE, HealthMonitor, card_section, no_signal_line, read_alarms, read_signal
from .rules import Alarm, HealthThresholds, evaluate_rules, threshold_problems
from .signal import NoLearningSignalError, group_signal, signal_verdict

__all__ = [
    "HEALTH_FILE", "Alarm", "GroupSummary", "HealthMonitor", "HealthThresholds", "NoLearningSignalError", "StepRecord",
    "card_section", "evaluate_rules", "group_signal", "no_signal_line", "pooled", "read_alarms", "read_signal",
    "signal_verdict", "threshold_problems",
]
