"""RLCEGRPOTrainer as a drop-in for GRPOTrainer where TRL's own features touch what RLCE adds: a reference model that
TRL moves (`sync_ref_model`), rows whose prompt an environment supplies (`environment_factory`), and the warning
TRL gives when every reward function returned None."""


import logging

import torch
from datasets import Dataset
from fakes import ScriptedVerifier
from testing_utils import preference_rows, tiny_grpo_args
from transformers import AutoModelForCausalLM

from rlce_trl import RLCEGRPOTrainer


def test_sync_ref_model_moves_the_reference_but_never_the_verifier(tiny_model_dir, tmp_path):
    """TRL's SyncRefModelCallback mixes the policy into the reference model every `ref_model_sync_steps`: the verifier
    must not be that model, and stays the initial checkpoint."""
    args = tiny_grpo_args(tmp_path / "out", beta=0.1, sync_ref_model=True, ref_model_sync_steps=1, max_steps=3)
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=Dataset.from_list(preference_rows(16)))
    ref_before = {n: p.detach().clone() for n, p in trainer.ref_model.named_parameters()}
    trainer.train()

    moved = [n for n, p in trainer.ref_model.named_parameters() if not torch.equal(ref_before[n], p)]
    assert moved, "the sync never ran: the test would prove nothing"
    initial = dict(AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).named_parameters())
    verifier = trainer.verifier.model
    assert verifier is not trainer.ref_model and verifier is not trainer.model
    differ = [n for n, p in verifier.named_parameters() if not torch.equal(initial[n], p)]
    assert not differ, differ


def test_without_sync_the_reference_model_is_reused_as_the_verifier(tiny_model_dir, tmp_path):
    args = tiny_grpo_args(tmp_path / "out", beta=0.1)
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=Dataset.from_list(preference_rows(16)))
    assert trainer.verifier.model is trainer.ref_model  # no second copy when nothing writes into it


def always_none(completions, **kwargs):
    return [None] * len(completions)


def always_one(completions, **kwargs):
    return [1.0] * len(completions)


def train_with(reward_funcs, tiny_model_dir, tmp_path, caplog):
    args = tiny_grpo_args(tmp_path / "out", max_steps=1)
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, reward_funcs=reward_funcs, args=args,
                              train_dataset=Dataset.from_list(preference_rows(16)),
                              verifier=ScriptedVerifier(lambda request: "yes"))
    with caplog.at_level(logging.WARNING, logger="rlce_trl.trainer"):
        trainer.train()
    return trainer


def test_a_warning_when_all_your_reward_functions_returned_none(tiny_model_dir, tmp_path, caplog):
    """TRL's "All reward functions returned None" cannot fire (rlce_format always returns a number); the trainer says
    the same about your own reward functions, naming the sample."""
    train_with(always_none, tiny_model_dir, tmp_path, caplog)
    assert "All your reward functions returned None for the following kwargs" in caplog.text
    assert "'prompt':" in caplog.text and "'completion':" in caplog.text and "'answer_options':" in caplog.text


def test_no_warning_when_one_of_yours_scores(tiny_model_dir, tmp_path, caplog):
    train_with([always_none, always_one], tiny_model_dir, tmp_path, caplog)
    assert "returned None" not in caplog.text
