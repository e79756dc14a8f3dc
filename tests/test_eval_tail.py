"""The evaluation tail of transformers' example scripts (and open-r1's) on an RLCEGRPOTrainer whose evaluation scored
no group: `metrics = trainer.evaluate(); trainer.log_metrics("eval", metrics); trainer.save_metrics("eval", metrics)`
must meet no None. Unscored groups are treated one way in training logs and evaluation metrics: the metric with no
value in the window is left out, and `rlce/unscored_fraction` says how many groups went unscored."""

import json
import math

from datasets import Dataset
from fakes import evidence_verifier
from testing_utils import preference_rows, tiny_grpo_args

from rlce_trl import RLCEGRPOTrainer


def _trainer(tiny_model_dir, tmp_path, verdicts):
    args = tiny_grpo_args(tmp_path / "out", max_steps=1, per_device_eval_batch_size=8, eval_strategy="no")
    data = Dataset.from_list(preference_rows(16))
    return RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=data, eval_dataset=data,
                           verifier=evidence_verifier(verdicts))


def _hf_examples_eval_tail(trainer, eval_dataset):
    """The tail of transformers' examples/pytorch/language-modeling/run_clm.py, verbatim but for `data_args`."""
    metrics = trainer.evaluate()

    max_eval_samples = len(eval_dataset)
    metrics["eval_samples"] = min(max_eval_samples, len(eval_dataset))
    try:
        perplexity = math.exp(metrics["eval_loss"])
    except OverflowError:
        perplexity = float("inf")
    metrics["perplexity"] = perplexity

    trainer.log_metrics("eval", metrics)
    trainer.save_metrics("eval", metrics)
    return metrics


def test_an_evaluation_that_scored_no_group_runs_the_hf_scripts_tail(tiny_model_dir, tmp_path):
    trainer = _trainer(tiny_model_dir, tmp_path, {})  # every verdict "unknown": every group ties, none is scored
    trainer.train()
    metrics = _hf_examples_eval_tail(trainer, trainer.eval_dataset)

    assert None not in metrics.values()
    assert "eval_rewards/rlce_verified/mean" not in metrics  # no scored group: no value, not None, not 0
    assert metrics["eval_rlce/unscored_fraction"] == 1.0
    assert metrics["eval_rewards/rlce_format/mean"] == metrics["eval_rewards/rlce_format/mean"]  # a number
    saved = json.loads((tmp_path / "out" / "eval_results.json").read_text())
    assert saved["eval_rlce/unscored_fraction"] == 1.0
    # training logs follow the same rule
    train_logs = [e for e in trainer.state.log_history if "rlce/unscored_fraction" in e]
    assert train_logs and all(None not in e.values() for e in train_logs)
    assert all("rewards/rlce_verified/mean" not in e for e in train_logs)


def test_a_scored_evaluation_reports_the_mean_over_scored_rollouts(tiny_model_dir, tmp_path):
    verdicts = {"positive>negative": "yes", "negative>positive": "no"}
    trainer = _trainer(tiny_model_dir, tmp_path, verdicts)
    metrics = _hf_examples_eval_tail(trainer, trainer.eval_dataset)
    assert None not in metrics.values()
    assert 0.0 <= metrics["eval_rlce/unscored_fraction"] <= 1.0
    if metrics["eval_rlce/unscored_fraction"] < 1.0:  # some group held both answers
        assert 0.0 <= metrics["eval_rewards/rlce_verified/mean"] <= 1.0
