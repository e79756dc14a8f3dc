"""Training health for label-free RL: notice collapse and entrenchment while the run goes on.

Label-free rewards can keep rising while the policy collapses onto one answer, or onto its own prior, and no gold
label notices during training. [`HealthMonitor`] (a `TrainerCallback`, on by default in `RLCEGRPOTrainer`) reads the
groups each step scored and logs under `health/*`:

- `health/one_answer_share`: share of groups whose rollouts all give one answer (within-group collapse);
- `health/answered_share`: share of rollouts that give an answer (answer loss: garbled or truncated completions);
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
- `health/entrenchment_cusum` (RLCE): a CUSUM of the groups since the reference whose verified answer is (not) the
  majority: it grows while the verified answer differs from the vote markedly less often than in the first steps,
  for groups whose votes split alike;
- `health/alarms`: number of rules that fire at this step;
- `health/step_signal`: 1 when this step, on its own, had a learning signal (some group's rewards differ), else 0.

The rules compare a run with its own first steps, so they cannot see a run that never had a signal. That is checked
in absolute terms from the first step ([`signal_verdict`]): every step without signal logs one line naming the cause
and the fix (the policy does not write the answer format; every rollout gives the same answer; the verifier
abstained on everything), and a run none of whose first `health_signal_patience` steps (default 2) had one stops:
its checkpoint is saved, the report and the model card say "no learning signal", and `RLCEGRPOTrainer.train` raises
[`NoLearningSignalError`] with that line (`rlce-trl train`: `error: no learning signal: ...`, exit status 2).

Every value is computed over the last `window` steps pooled (the entrenchment CUSUM over every step since the
reference); the *reference* is the first `warmup` steps pooled
(the base model's behaviour). Rules are checked once `warmup + window` steps are in, so the two never overlap. Each
rule is a small pure function (`check_*`) with its rule in its docstring; the first step a rule fires raises an
[`Alarm`]: a warning naming the metric, its value and the step, written to the log, the evidence trail
(a `{"type": "health_alarm"}` line), `<output_dir>/rlce_health.jsonl` (which the run report shows) and the model
card. With `stop=True` the first alarm ends the run cleanly: a checkpoint is saved and the card says why.

The default thresholds ([`HealthThresholds`]) were tuned on simulated runs (`python -m benchmarks.health_simulation`)
and checked on held-out seeds there.

- `metrics`: what the monitor reads of each group ([`GroupSummary`]) and the metrics, pure functions;
- `rules`: [`HealthThresholds`], one `check_*` per rule, [`Alarm`];
- `signal`: whether a step has a learning signal at all, in absolute terms ([`signal_verdict`]: cause and fix);
- `monitor`: [`HealthMonitor`], the alarms file ([`read_alarms`]) and the model card's section ([`card_section`]).
"""

from __future__ import annotations

from .metrics import GroupSummary, StepRecord, pooled
from .monitor import HEALTH_FILE, HealthMonitor, card_section, evaluate_rules, no_signal_line, read_alarms, read_signal
from .rules import Alarm, HealthThresholds, threshold_problems
from .signal import NoLearningSignalError, group_signal, signal_verdict

__all__ = [
    "HEALTH_FILE", "Alarm", "GroupSummary", "HealthMonitor", "HealthThresholds", "NoLearningSignalError", "StepRecord",
    "card_section", "evaluate_rules", "group_signal", "no_signal_line", "pooled", "read_alarms", "read_signal",
    "signal_verdict", "threshold_problems",
]
