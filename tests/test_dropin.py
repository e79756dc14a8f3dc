"""RLCEGRPOTrainer as a drop-in for GRPOTrainer where TRL's own features touch what RLCE adds: a reference model that
TRL moves (`sync_ref_model`), rows whose prompt an environment supplies (`environment_factory`), and the warning
TRL gives when every reward function returned None."""


import logging

import pytest
import torch
from datasets import Dataset
from fakes import ScriptedVerifier
from testing_utils import build_tool_chat_model, preference_rows, tiny_grpo_args
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
    assert "rlce_group_reward" not in caplog.text and "rlce_answer" not in caplog.text  # the trainer's own columns


def test_no_warning_when_one_of_yours_scores(tiny_model_dir, tmp_path, caplog):
    train_with([always_none, always_one], tiny_model_dir, tmp_path, caplog)
    assert "returned None" not in caplog.text


# -- environments (TRL's `environment_factory`) -----------------------------------------------------------------------
class CounterEnvironment:
    def reset(self, **kwargs):
        RESETS.append(("counter", kwargs))
        return "the user likes food"

    def increment(self, step: int) -> int:
        """
        Increment the internal counter.

        Args:
            step: Value to add to the counter.

        Returns:
            The updated counter value.
        """
        return step


class EchoEnvironment:
    def reset(self, **kwargs):
        RESETS.append(("echo", kwargs))
        return "the user said no"

    def shout(self, text: str) -> str:
        """
        Shout the given text.

        Args:
            text: Text to shout.

        Returns:
            The text in upper case.
        """
        return text.upper()


class DriftingEnvironment(EchoEnvironment):
    """Every instance supplies its own prompt: the rollouts of one row answer different questions."""

    count = 0

    def reset(self, **kwargs):
        DriftingEnvironment.count += 1
        return f"question {DriftingEnvironment.count}"


RESETS: list = []


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory):
    return str(build_tool_chat_model(tmp_path_factory.mktemp("tool-model")))


def environment_trainer(tool_model, tmp_path, environment_factory, rows, verifier):
    from testing_utils import scripted_generate

    args = tiny_grpo_args(tmp_path / "out", per_device_train_batch_size=4, num_generations=2, max_steps=1,
                          shuffle_dataset=False, max_completion_length=16)
    trainer = RLCEGRPOTrainer(model=tool_model, args=args, train_dataset=Dataset.from_dict(rows),
                              environment_factory=environment_factory, verifier=verifier)
    trainer.model.generate = scripted_generate(trainer.model, trainer.processing_class,
                                               ["\\boxed{yes}", "\\boxed{no}"])
    return trainer


def test_rows_whose_prompt_an_environment_supplies_are_trained_and_scored(tool_model, tmp_path):
    """TRL's multi-environment rows hold only `environment`; each rollout's `reset()` supplies the prompt. RLCE scores
    the groups with that prompt as the context the verifier reads."""
    RESETS.clear()
    verifier = ScriptedVerifier(lambda request: "yes")
    trainer = environment_trainer(tool_model, tmp_path, {"counter": CounterEnvironment, "echo": EchoEnvironment},
                                  {"environment": ["counter", "echo"] * 4}, verifier)
    trainer.train()

    assert {name for name, _ in RESETS} == {"counter", "echo"}
    assert all("environment" not in kwargs for _, kwargs in RESETS)
    contexts = " ".join(m["content"] for batch in verifier.batches for r in batch for m in r.messages)
    assert "the user likes food" in contexts and "the user said no" in contexts  # reset() supplied the context
    logged = [e for e in trainer.state.log_history if "rlce/distinct_answers_mean" in e]
    assert logged and logged[0]["rlce/distinct_answers_mean"] == 2 and logged[0]["rlce/verifier_calls"] > 0


def test_rows_without_a_prompt_fail_at_once_without_an_environment(tool_model, tmp_path):
    from rlce_trl.errors import InputError

    with pytest.raises(InputError, match="no `prompt` field"):
        RLCEGRPOTrainer(model="never/loaded", args=tiny_grpo_args(tmp_path / "out"),
                        train_dataset=Dataset.from_dict({"environment": ["counter", "echo"] * 4}))


def test_an_environment_that_gives_one_rows_rollouts_different_prompts_is_named(tool_model, tmp_path):
    from rlce_trl.errors import InputError

    trainer = environment_trainer(tool_model, tmp_path, DriftingEnvironment, {"seed": [0, 1, 2, 3] * 2},
                                  ScriptedVerifier(lambda request: "yes"))
    with pytest.raises(InputError, match=r"reset\(\) gave the 2 rollouts of one row different prompts"):
        trainer.train()


def test_the_text_of_a_tool_calling_completion_is_the_assistants_turns():
    from rlce_trl.data.prompts import completion_text

    call = {"type": "function", "function": {"name": "increment", "arguments": {"step": 1}}}
    completion = [{"role": "assistant", "content": None, "tool_calls": [call]},
                  {"role": "tool", "name": "increment", "content": "1"},
                  {"role": "assistant", "content": [{"type": "text", "text": "so \\boxed{1}"}]}]
    assert completion_text(completion) == "so \\boxed{1}"
