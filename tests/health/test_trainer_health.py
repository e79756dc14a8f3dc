"""The monitor inside RLCEGRPOTrainer: on by default, metrics in the logs, `health_stop` ends a run cleanly."""

import json
import os

import pytest
from datasets import Dataset
from testing_utils import preference_rows, tiny_grpo_args

from rlce_trl import RLCEGRPOConfig, RLCEGRPOTrainer
from rlce_trl.health import HEALTH_FILE, read_alarms


def test_health_metrics_are_logged_every_step(tiny_model_dir, tmp_path):
    args = tiny_grpo_args(tmp_path / "out", max_steps=3, reward_method="ttrl", health_warmup_steps=1,
                          health_window=1)
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=Dataset.from_list(preference_rows(16)))
    assert trainer.health is not None and trainer.health in trainer.callback_handler.callbacks
    trainer.train()
    logs = [e for e in trainer.state.log_history if "health/one_answer_share" in e]
    assert [e["step"] for e in logs] == [1, 2, 3]
    for key in ("health/zero_spread_share", "health/signal_share", "health/answer_entropy", "health/alarms"):
        assert all(key in e for e in logs), key
    assert "health/answer_entropy_ratio" in logs[1]  # against the first step
    assert "health/verified_majority_share" not in logs[0]  # TTRL's verified answer is the vote by construction
    # with a one-step window the logged share is that of the step's groups in the evidence trail
    groups = [json.loads(line) for line in open(os.path.join(args.output_dir, "rlce_evidence.jsonl"))]
    for entry in logs:
        mine = [r["assignment"] for r in groups if r.get("step") == entry["step"]]
        unanimous = [None not in a and len(set(a)) == 1 for a in mine]
        assert entry["health/one_answer_share"] == pytest.approx(sum(unanimous) / len(mine))


def test_health_stop_ends_the_run_with_a_checkpoint_and_says_why(tiny_model_dir, tmp_path):
    # thresholds that make the within-group rule fire at the first checked step (step 2), whatever the groups
    args = tiny_grpo_args(tmp_path / "out", max_steps=4, health_stop=True, health_warmup_steps=1, health_window=1,
                          health_thresholds='{"collapse_share": 0.0, "collapse_margin": -1.0}')
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=Dataset.from_list(preference_rows(16)))
    trainer.train()
    assert trainer.state.global_step == 2
    assert trainer.health.stopped_by is not None and trainer.health.stopped_by.rule == "within_group_collapse"
    out = args.output_dir
    assert os.path.isdir(os.path.join(out, "checkpoint-2"))
    alarms = read_alarms(os.path.join(out, HEALTH_FILE))
    assert alarms[0]["stopped"] and alarms[0]["step"] == 2
    card = open(os.path.join(out, "README.md"), encoding="utf-8").read()
    assert "Training was stopped early at step 2 by the training-health monitor" in card
    trail = open(os.path.join(out, "rlce_evidence.jsonl"), encoding="utf-8").read()
    assert '"type": "health_alarm"' in trail


def test_health_monitor_can_be_turned_off(tiny_model_dir, tmp_path):
    args = tiny_grpo_args(tmp_path / "out", max_steps=1, reward_method="ttrl", health_monitor=False)
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=Dataset.from_list(preference_rows(16)))
    trainer.train()
    assert trainer.health is None
    assert not any(k.startswith("health/") for e in trainer.state.log_history for k in e)


@pytest.mark.parametrize("bad, message", [
    ({"health_window": 0}, "health_window must be >= 1"),
    ({"health_thresholds": "{not json"}, "health_thresholds is not valid JSON"),
    ({"health_thresholds": '{"colapse_share": 1}'}, "unknown threshold 'colapse_share'"),
])
def test_bad_health_settings_fail_in_the_config(tmp_path, bad, message):
    with pytest.raises(ValueError, match=message):
        RLCEGRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, **bad)


def test_a_judging_baseline_feeds_the_drift_metric(tiny_model_dir, tmp_path):
    args = tiny_grpo_args(tmp_path / "out", max_steps=2, reward_method="policy_judge", health_warmup_steps=1,
                          health_window=1)
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=Dataset.from_list(preference_rows(16)))
    trainer.train()
    second = [e for e in trainer.state.log_history if "health/alarms" in e][1]
    assert 0.0 <= second["health/verdict_drift"] <= 1.0  # the judge's verdicts, counted by its StepStats
