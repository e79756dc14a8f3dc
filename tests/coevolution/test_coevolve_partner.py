"""The partner model in the trainer (tiny real model on CPU): loaded once and handed to a scorer that takes
`partner`; dataset columns named by a scorer reach it (`Group.columns`); a partner server that is down fails before
any model loads."""

import socket
import time

import pytest
from datasets import Dataset
from testing_utils import preference_rows, tiny_grpo_args

from rlce_trl import RLCEGRPOTrainer
from rlce_trl.methods.rlac import critic_rows, generator_rows
from rlce_trl.verifiers.base import VerifierUnavailableError


def test_partner_is_loaded_and_reaches_the_generator_scorer(tiny_model_dir, tmp_path):
    args = tiny_grpo_args(tmp_path / "out", max_steps=1, reward_method="rlac_generator",
                          partner_model_name_or_path=tiny_model_dir, rlce_verified_weight=1.0, rlce_format_weight=0.0,
                          reward_method_kwargs={"critic_max_tokens": 8, "validator_max_tokens": 2})
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args,
                              train_dataset=Dataset.from_list(generator_rows(preference_rows(16, closed=False))))
    assert trainer.partner is not None and trainer.partner is not trainer.verifier
    assert trainer.partner.model is not trainer.verifier.model and trainer.group_scorer.partner is trainer.partner
    trainer.train()
    assert trainer.partner.stats.calls_by_stage == {"rlac_critic": 1}  # one batched critic call for the step
    assert trainer.state.log_history[0]["rlac_generator/tests_built"] == 16


def test_critic_phase_reads_its_columns(tiny_model_dir, tmp_path):
    rows = critic_rows(generator_rows(preference_rows(4, closed=False)), ["the food"] * 4)
    args = tiny_grpo_args(tmp_path / "out", max_steps=1, reward_method="rlac_critic", per_device_train_batch_size=8,
                          rlce_verified_weight=1.0, rlce_format_weight=0.0)
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=Dataset.from_list(rows))
    assert trainer.partner is None
    trainer.train()  # the critic scorer raises without rlac_response / rlac_context in Group.columns
    log = trainer.state.log_history[0]
    assert "rewards/rlac_critic/mean" in log and "rlac_critic/verifier_calls" in log


def test_partner_server_down_fails_before_any_model_loads(tiny_model_dir, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = tiny_grpo_args(tmp_path / "out", partner_mode="server", partner_server_base_url=f"http://127.0.0.1:{port}")
    start = time.perf_counter()
    with pytest.raises(VerifierUnavailableError, match=rf"partner server at http://127\.0\.0\.1:{port}"):
        RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=Dataset.from_list(preference_rows(16)))
    assert time.perf_counter() - start < 30
