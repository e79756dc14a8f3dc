"""A verifier that fails for good mid-run stops training with `VerifierUnavailableError` and leaves the checkpoint of
the last finished step (every process raises together in the reward gather, so the save is safe under ZeRO-3 too:
tests/distributed/test_zero3_verifier_faults.py). One process here, a FAKE verifier that fails after step 2."""

import json

import pytest
from datasets import Dataset
from fakes import ScriptedVerifier
from testing_utils import preference_rows, tiny_grpo_args
from transformers import TrainerCallback

from rlce_trl import RLCEGRPOTrainer
from rlce_trl.verifiers import VerifierUnavailableError


class DiesAfterStep2(ScriptedVerifier):
    dead = False

    def _generate(self, requests):
        if self.dead:
            raise VerifierUnavailableError("the fake verifier is gone")
        return super()._generate(requests)


class KillAt(TrainerCallback):
    def __init__(self, verifier):
        self.verifier = verifier

    def on_step_end(self, args, state, control, **kwargs):
        self.verifier.dead = state.global_step >= 2


def test_the_last_finished_step_is_saved_when_the_verifier_fails_for_good(tiny_model_dir, tmp_path):
    verifier = DiesAfterStep2(lambda request: "yes")
    args = tiny_grpo_args(tmp_path / "out", max_steps=5, save_strategy="no")
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, verifier=verifier,
                              train_dataset=Dataset.from_list(preference_rows(16)), callbacks=[KillAt(verifier)])
    with pytest.raises(VerifierUnavailableError, match="failed persistently"):
        trainer.train()
    assert trainer.state.global_step == 2
    assert sorted(p.name for p in (tmp_path / "out").glob("checkpoint-*")) == ["checkpoint-2"]
    state = json.loads((tmp_path / "out" / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    resumed = RLCEGRPOTrainer(model=tiny_model_dir, args=tiny_grpo_args(tmp_path / "out", max_steps=3),
                              verifier=ScriptedVerifier(lambda request: "yes"),
                              train_dataset=Dataset.from_list(preference_rows(16)))
    resumed.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-2"))
    assert resumed.state.global_step == 3
