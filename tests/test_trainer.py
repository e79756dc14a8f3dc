"""RLCEGRPOTrainer end to end on CPU with a tiny real model as policy and as frozen verifier."""

import glob
import os

import pytest
import torch
from datasets import Dataset
from testing_utils import preference_rows, tiny_grpo_args

from rlce_trl import RLCEGRPOTrainer


def make_args(tmp_path, **overrides):
    return tiny_grpo_args(tmp_path / "out", **overrides)


def test_two_steps_every_parameter_changes_and_rlce_is_logged(tiny_model_dir, tmp_path):
    dataset = Dataset.from_list(preference_rows(16))
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=make_args(tmp_path, log_completions=True),
                              train_dataset=dataset)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    verifier_before = {n: p.detach().clone() for n, p in trainer.verifier.model.named_parameters()}
    trainer.train()

    changed = {n: not torch.equal(before[n], p) for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert all(changed.values()), [n for n, c in changed.items() if not c]
    # the verifier is frozen: a separate copy of the initial checkpoint that never moves
    assert trainer.verifier.model is not trainer.model
    assert all(torch.equal(verifier_before[n], p) for n, p in trainer.verifier.model.named_parameters())

    logs = [entry for entry in trainer.state.log_history if "rlce/unscored_fraction" in entry]  # every step
    assert len(logs) == 2
    for key in ("rewards/rlce_format/mean", "rlce/distinct_answers_mean", "rlce/tests_built", "rlce/tie_rate",
                "rlce/verdict_yes_frac", "rlce/verified_fraction", "rlce/verifier_seconds", "rlce/verifier_calls"):
        assert key in logs[0], key
    # the verifier really ran: verdicts came back from the model (guided choice), tests were built
    assert sum(e["rlce/tests_validated"] for e in logs) > 0
    fractions = ("rlce/verdict_yes_frac", "rlce/verdict_no_frac", "rlce/verdict_unknown_frac")
    assert sum(e[k] for e in logs for k in fractions) > 0
    assert trainer.reward_weights.tolist() == pytest.approx([0.8, 0.2])

    import pandas as pd

    table = pd.read_parquet(sorted(glob.glob(os.path.join(trainer.args.output_dir, "completions", "*.parquet")))[-1])
    for column in ("rlce_answer", "rlce_verified_answer", "rlce_scores", "rlce_status", "rlce_verified"):
        assert column in table.columns, column


def test_user_reward_funcs_come_after_rlce_with_their_own_weights(tiny_model_dir, tmp_path):
    def brevity(completions, **kwargs):
        return [1.0] * len(completions)

    args = make_args(tmp_path, max_steps=1, reward_weights=[0.5], rlce_verified_weight=0.6, rlce_format_weight=0.4)
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, reward_funcs=brevity, args=args,
                              train_dataset=Dataset.from_list(preference_rows(16)))
    assert trainer.reward_func_names == ["rlce_verified", "rlce_format", "brevity"]
    assert trainer.reward_weights.tolist() == pytest.approx([0.6, 0.4, 0.5])
    assert args.reward_weights == [0.5]


def test_reward_weights_must_match_your_reward_funcs(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError, match="weights your own reward_funcs only"):
        RLCEGRPOTrainer(model=tiny_model_dir, args=make_args(tmp_path, reward_weights=[1.0, 1.0]),
                        train_dataset=Dataset.from_list(preference_rows(16)))


def test_reference_model_is_reused_as_verifier(tiny_model_dir, tmp_path):
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=make_args(tmp_path, beta=0.01, max_steps=1),
                              train_dataset=Dataset.from_list(preference_rows(16)))
    assert trainer.verifier.model is trainer.accelerator.unwrap_model(trainer.ref_model)
    trainer.train()


def test_peft_base_model_is_the_verifier(tiny_model_dir, tmp_path):
    from peft import LoraConfig

    trainer = RLCEGRPOTrainer(
        model=tiny_model_dir, args=make_args(tmp_path, max_steps=1),
        train_dataset=Dataset.from_list(preference_rows(16)),
        peft_config=LoraConfig(r=4, target_modules=["q_proj", "v_proj"]),
    )
    assert trainer.verifier.model is trainer.accelerator.unwrap_model(trainer.model)
    trainer.train()
    assert trainer.model.training  # the verifier switched eval mode off again


def test_static_tests_are_saved_with_checkpoints_and_restored(tiny_model_dir, tmp_path):
    dataset = Dataset.from_list(preference_rows(16))
    args = make_args(tmp_path, rlce_mode="static", save_strategy="steps", save_steps=1)
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=dataset)
    trainer.train()
    saved = os.path.join(args.output_dir, "checkpoint-2", "rlce_scorer_state.json")
    assert os.path.exists(saved)
    resumed = RLCEGRPOTrainer(model=tiny_model_dir, args=make_args(tmp_path, rlce_mode="static", max_steps=3,
                                                                    save_strategy="no"), train_dataset=dataset)
    resumed.train(resume_from_checkpoint=os.path.join(args.output_dir, "checkpoint-2"))
    assert resumed.group_scorer.static_tests.keys() >= trainer.group_scorer.static_tests.keys()


def test_a_baseline_replaces_the_rlce_reward_by_name(tiny_model_dir, tmp_path):
    args = make_args(tmp_path, max_steps=1, reward_method="policy_judge")
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=Dataset.from_list(preference_rows(16)))
    assert trainer.reward_func_names == ["policy_judge", "rlce_format"]
    trainer.train()
    log = trainer.state.log_history[0]
    assert "rewards/policy_judge/mean" in log and "policy_judge/verifier_calls" in log


def test_a_rubric_baseline_brings_its_own_format_term(tiny_model_dir, tmp_path):
    """D.3: RaR / RLER are rewarded 0.8 S_rubric + 0.2 (answer tag + justification), not RLCE's boxed format."""
    args = make_args(tmp_path, max_steps=1, reward_method="rar")
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=Dataset.from_list(preference_rows(16)))
    assert trainer.reward_func_names == ["rar", "rubric_format"]
    assert trainer.reward_weights.tolist() == pytest.approx([0.8, 0.2])
    trainer.train()
    assert "rewards/rubric_format/mean" in trainer.state.log_history[0]


def test_a_verifier_server_that_is_down_fails_fast_with_the_fix(tiny_model_dir, tmp_path):
    import socket
    import time

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = make_args(tmp_path, verifier_mode="server", verifier_server_base_url=f"http://127.0.0.1:{port}/v1")
    start = time.perf_counter()
    with pytest.raises(Exception, match=rf"(?s)127\.0\.0\.1:{port}.*vllm serve <initial checkpoint>"):
        RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=Dataset.from_list(preference_rows(16)))
    assert time.perf_counter() - start < 30


def test_a_training_set_smaller_than_one_generation_batch_is_refused_before_the_model_loads(tmp_path):
    from rlce_trl.errors import InputError

    args = tiny_grpo_args(tmp_path, per_device_train_batch_size=8, num_generations=2)  # 4 prompts per batch
    dataset = Dataset.from_list(preference_rows(3))
    with pytest.raises(InputError, match=r"has 3 prompt\(s\), fewer than the 4 one generation batch needs"):
        RLCEGRPOTrainer(model=str(tmp_path / "no-model-is-loaded"), args=args, train_dataset=dataset)
