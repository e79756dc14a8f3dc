"""The drop-in promise, checked the way TRL checks GRPOTrainer: a representative set of the arguments of TRL's own
`GRPOTrainer` tests (`tests/test_grpo_trainer.py`: their `GRPOConfig` settings, reward functions, reward models,
PEFT, tools and environments), each run with `RLCEGRPOTrainer` substituted, offline, on tiny local models and CPU.

Each case trains like TRL's test (TRL's batch of 3 prompts x 3 generations, 8-token completions, lr 0.1) with the
default in-process verifier (a frozen copy of the initial checkpoint, the reference model or the PEFT base), and
checks what TRL checks (a train loss, the policy moved) plus what RLCE adds: its rewards are logged and the verifier
is still the initial checkpoint. Cases that need a model or a kernel offline CI does not have (vLLM on a GPU, Liger,
Hub checkpoints of other families) are left to the GPU check and the architecture tests. `trust_remote_code`,
`sync_ref_model` and the environment rows have their own tests (`tests/verifiers/test_checkpoint_kwargs.py`,
`tests/test_dropin.py`).
"""

from __future__ import annotations

import asyncio

import pytest
import torch
from datasets import Dataset, IterableDataset
from testing_utils import build_tiny_model, build_tool_chat_model, preference_rows, scripted_generate, tiny_grpo_args

from rlce_trl import RLCEGRPOTrainer

pytestmark = pytest.mark.slow

#: TRL's sizes (`per_device_train_batch_size=3, num_generations=3, max_completion_length=8, learning_rate=0.1`).
TRL_SIZES = dict(per_device_train_batch_size=3, per_device_eval_batch_size=3, num_generations=3,
                 max_completion_length=8, learning_rate=0.1, max_steps=1)
#: Two steps where the second one is what the arguments change (a reused generation batch, a reference-model sync).
TWO_STEPS = {"max_steps": 2}


def reward_len(completions, **kwargs):
    """TRL's reward function of its reward-function tests: longer completions score higher."""
    return [float(len(_text(c))) for c in completions]


def reward_distinct(completions, **kwargs):
    return [float(len(set(_text(c)))) for c in completions]


async def async_reward_len(completions, **kwargs):
    await asyncio.sleep(0)
    return reward_len(completions)


def reward_none(completions, **kwargs):
    return [None] * len(completions)


def reward_from_column(completions, some_values, **kwargs):
    """TRL's `test_train_reward_func_additional_column`: a dataset column reaches the reward function."""
    return [float(len(_text(c))) + v for c, v in zip(completions, some_values, strict=True)]


def reward_reading_trainer_state(completions, trainer_state, **kwargs):
    assert trainer_state is not None and trainer_state.global_step >= 0
    return reward_len(completions)


def reward_logging(completions, log_extra, log_metric, **kwargs):
    log_extra("crosscheck_len", [len(_text(c)) for c in completions])
    log_metric("crosscheck_metric", 1.0)
    return reward_len(completions)


def multiply_tool(a: int, b: int) -> int:
    """
    Multiplies two integers.

    Args:
        a: The first integer.
        b: The second integer.

    Returns:
        The product of the two integers.
    """
    return a * b


class CounterEnvironment:
    """An environment that owns its reward (`get_reward`), as in TRL's `test_train_with_environment_owned_reward`."""

    def reset(self, **kwargs):
        self._counter = 0

    def increment(self, step: int) -> int:
        """
        Increment the internal counter.

        Args:
            step: Value to add to the counter.

        Returns:
            The updated counter value.
        """
        self._counter += step
        return self._counter

    def get_reward(self) -> float:
        return float(self._counter)


class GuessEnvironment:
    """An environment that owns the data: `reset()` returns the prompt and there is no `train_dataset`."""

    def reset(self, **kwargs):
        return "the user said yes"

    def guess(self, word: str) -> str:
        """
        Guess the word.

        Args:
            word: The guess.

        Returns:
            Whether the guess is right.
        """
        return "no"


def _text(completion) -> str:
    return completion if isinstance(completion, str) else "".join(m.get("content") or "" for m in completion)


def standard_rows(n: int = 8) -> list[dict]:
    """TRL's `standard_prompt_only` format: the prompt is a plain string."""
    return [{"prompt": row["prompt"][0]["content"], "answer_options": row["answer_options"]}
            for row in preference_rows(n)]


# (id, GRPOConfig settings, trainer keyword arguments, dataset). The id is the TRL test the arguments come from.
CASES = [
    ("test_train", {}, dict(reward_funcs=reward_len), "conversational"),
    ("test_train_dataset_format[standard_prompt_only]", {}, dict(reward_funcs=reward_len), "standard"),
    *[(f"test_train_loss_types[{loss}]", {"loss_type": loss}, dict(reward_funcs=reward_len), "standard")
      for loss in ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo")],
    ("test_train_with_eval", {"eval_strategy": "steps", "eval_steps": 1}, dict(reward_funcs=reward_len), "eval"),
    ("test_train_with_num_generations_eval", {"num_generations_eval": 1, "eval_strategy": "steps", "eval_steps": 1},
     dict(reward_funcs=reward_len), "eval"),
    ("test_train_eval_on_start", {"loss_type": "grpo", "eval_strategy": "steps", "eval_steps": 1,
                                  "eval_on_start": True}, dict(reward_funcs=reward_len), "eval"),
    ("test_train_with_iterable_dataset", {}, dict(reward_funcs=reward_len), "iterable"),
    ("test_train_multiple_iterations", {"num_iterations": 2, **TWO_STEPS}, dict(reward_funcs=reward_len),
     "standard"),
    ("test_train_peft_config", {}, dict(reward_funcs=reward_len, peft_config="lora"), "standard"),
    ("test_train_different_reward_model", {}, dict(reward_funcs="reward_model"), "standard"),
    ("test_single_reward_model_with_single_processing_class", {},
     dict(reward_funcs="reward_model", reward_processing_classes="reward_tokenizer"), "standard"),
    ("test_train_reward_func_conversational", {}, dict(reward_funcs=reward_len), "conversational"),
    ("test_train_multiple_reward_funcs", {}, dict(reward_funcs=[reward_len, reward_distinct]), "standard"),
    ("test_train_sync_and_async_reward_funcs", {}, dict(reward_funcs=[reward_len, async_reward_len]), "standard"),
    ("test_train_multiple_reward_funcs_with_None_output", {}, dict(reward_funcs=[reward_len, reward_none]),
     "standard"),
    ("test_train_multiple_reward_funcs_with_weights", {"reward_weights": [0.7, 0.3]},
     dict(reward_funcs=[reward_len, reward_distinct]), "standard"),
    *[(f"test_reward_metric_reflects_reward_weights[{how}]",
       {"reward_weights": [2.0, 0.5], "multi_objective_aggregation": how},
       dict(reward_funcs=[reward_len, reward_distinct]), "standard")
      for how in ("sum_then_normalize", "normalize_then_sum")],
    ("test_train_multiple_mixed_reward_funcs", {}, dict(reward_funcs=["reward_model", reward_len]), "standard"),
    ("test_train_reward_func_additional_column", {}, dict(reward_funcs=reward_from_column), "column"),
    ("test_train_beta_non_zero", {"beta": 0.1}, dict(reward_funcs=reward_len), "standard"),
    ("test_train_with_sync_ref_model",
     {"beta": 0.1, "sync_ref_model": True, "ref_model_sync_steps": 2, **TWO_STEPS},
     dict(reward_funcs=reward_len), "standard"),
    ("test_train_with_pad_to_multiple_of", {"pad_to_multiple_of": 8}, dict(reward_funcs=reward_len), "standard"),
    ("test_train_with_off_policy_mask", {"off_policy_mask_threshold": 0.5, "num_iterations": 2, **TWO_STEPS},
     dict(reward_funcs=reward_len), "standard"),
    ("test_train_with_bias_correction_kl", {"beta": 0.1, "use_bias_correction_kl": True},
     dict(reward_funcs=reward_len), "standard"),
    ("test_train_with_cast_lm_head_to_fp32", {"cast_lm_head_to_fp32": True}, dict(reward_funcs=reward_len),
     "standard"),
    ("test_train_with_static_entropy", {"entropy_coef": 0.1}, dict(reward_funcs=reward_len), "standard"),
    ("test_train_with_adaptive_entropy", {"entropy_coef": 0.01, "use_adaptive_entropy": True, "entropy_target": 15.0},
     dict(reward_funcs=reward_len), "standard"),
    ("test_train_with_entropy_filter", {"top_entropy_quantile": 0.2}, dict(reward_funcs=reward_len), "standard"),
    ("test_train_with_additional_generation_kwargs",
     {"top_p": 0.9, "top_k": 10, "min_p": 0.01, "repetition_penalty": 1.1}, dict(reward_funcs=reward_len),
     "standard"),
    *[(f"test_train_scale_rewards[{scale}]", {"scale_rewards": scale}, dict(reward_funcs=reward_len), "standard")
      for scale in (False, "group", "batch", True, "none")],
    ("test_train_with_mask_truncated_completions_all_masked",
     {"mask_truncated_completions": True, "loss_type": "dapo"}, dict(reward_funcs=reward_len), "standard"),
    ("test_train_num_generations_larger_than_batch_size", {"num_generations": 6, "gradient_accumulation_steps": 2},
     dict(reward_funcs=reward_len), "standard"),
    ("test_train_delta_clipping", {"delta": 2.0}, dict(reward_funcs=reward_len), "standard"),
    ("test_train_with_generation_kwargs",
     {"generation_kwargs": {"do_sample": True, "top_k": 50, "num_beams": 2, "length_penalty": -0.1}},
     dict(reward_funcs=reward_len), "standard"),
    ("test_train_with_reward_func_accessing_trainer_state", {}, dict(reward_funcs=reward_reading_trainer_state),
     "standard"),
    ("test_train_reward_func_with_log_extra_and_log_metric", {"log_completions": True},
     dict(reward_funcs=reward_logging), "standard"),
    ("test_train_sequence_importance_sampling",
     {"num_iterations": 2, "importance_sampling_level": "sequence", **TWO_STEPS},
     dict(reward_funcs=reward_len), "standard"),
    ("test_train_with_chat_template_kwargs", {"chat_template_kwargs": {"enable_thinking": False}},
     dict(reward_funcs=reward_len), "conversational"),
    ("test_train_with_tools", {}, dict(reward_funcs=reward_len, tools=[multiply_tool]), "tools"),
    ("test_environment_owned_reward_coexists_with_reward_funcs", {},
     dict(reward_funcs=reward_len, environment_factory=CounterEnvironment), "tools"),
    ("test_train_with_environment_owned_data", {},
     dict(reward_funcs=reward_len, environment_factory=GuessEnvironment), "no-dataset"),
]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict:
    """The tiny local models TRL's Hub ones stand for: a causal LM, a reward model (sequence classification) with
    its tokenizer, and a causal LM whose chat template renders tool calls."""
    from transformers import AutoConfig, AutoTokenizer, LlamaForSequenceClassification

    root = tmp_path_factory.mktemp("crosscheck")
    policy = build_tiny_model(root / "policy")
    reward_path = root / "reward"
    base = build_tiny_model(root / "reward-base", seed=1)
    tokenizer = AutoTokenizer.from_pretrained(base)
    config = AutoConfig.from_pretrained(base, num_labels=1)
    torch.manual_seed(1)
    LlamaForSequenceClassification(config).save_pretrained(reward_path)
    tokenizer.save_pretrained(reward_path)
    return {"policy": policy, "reward_model": str(reward_path), "tools": str(build_tool_chat_model(root / "tools"))}


def _dataset(kind: str):
    if kind == "standard":
        return Dataset.from_list(standard_rows()), None
    if kind == "conversational":
        return Dataset.from_list(preference_rows(8)), None
    if kind == "eval":
        return Dataset.from_list(standard_rows()), Dataset.from_list(standard_rows(3))
    if kind == "iterable":
        rows = standard_rows()
        return IterableDataset.from_generator(lambda: iter(rows)), None
    if kind == "column":
        return Dataset.from_list([{**row, "some_values": float(i)} for i, row in enumerate(standard_rows())]), None
    if kind == "tools":
        return Dataset.from_list(preference_rows(8)), None
    if kind == "no-dataset":
        return None, None
    raise ValueError(kind)


def _resolve(trainer_kwargs: dict, models: dict) -> dict:
    """Put the local models where the case names TRL's Hub ones (`"reward_model"`, `"lora"`)."""
    from transformers import AutoTokenizer

    def model(value):
        return models["reward_model"] if value == "reward_model" else value

    kwargs = dict(trainer_kwargs)
    funcs = kwargs.get("reward_funcs")
    if funcs is not None:
        kwargs["reward_funcs"] = [model(f) for f in funcs] if isinstance(funcs, list) else model(funcs)
    if kwargs.get("reward_processing_classes") == "reward_tokenizer":
        kwargs["reward_processing_classes"] = AutoTokenizer.from_pretrained(models["reward_model"])
    if kwargs.get("peft_config") == "lora":
        from peft import LoraConfig

        kwargs["peft_config"] = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    return kwargs


@pytest.mark.parametrize(("settings", "trainer_kwargs", "data"), [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_trl_grpo_arguments_train_with_rlce_substituted(settings, trainer_kwargs, data, models, tmp_path):
    train, evaluation = _dataset(data)
    on_tools = data in ("tools", "no-dataset")
    args = tiny_grpo_args(tmp_path / "out", **{**TRL_SIZES, **settings})
    trainer = RLCEGRPOTrainer(model=models["tools" if on_tools else "policy"], args=args, train_dataset=train,
                              eval_dataset=evaluation, **_resolve(trainer_kwargs, models))
    if on_tools:  # a random tiny model writes no answers; these rows make groups with two of them
        trainer.model.generate = scripted_generate(trainer.model, trainer.processing_class,
                                                   ["\\boxed{positive}", "so \\boxed{negative}"])
    policy_before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    verifier = trainer.verifier.model
    verifier_before = {n: p.detach().clone() for n, p in verifier.named_parameters()}

    trainer.train()

    assert trainer.state.log_history[-1]["train_loss"] is not None
    trainable = [(n, p) for n, p in trainer.model.named_parameters() if p.requires_grad]
    assert any(not torch.equal(policy_before[n], p) for n, p in trainable), "no trainable parameter moved"
    logged = [entry for entry in trainer.state.log_history if "rewards/rlce_format/mean" in entry]
    assert logged and all("rlce/distinct_answers_mean" in entry for entry in logged)
    with torch.no_grad():  # the verifier is the initial checkpoint still (the PEFT base: with the adapter disabled)
        context = verifier.disable_adapter() if hasattr(verifier, "disable_adapter") else torch.no_grad()
        with context:
            differ = [n for n, p in verifier.named_parameters() if "lora_" not in n
                      and not torch.equal(verifier_before[n], p)]
    assert not differ, differ
    if evaluation is not None:
        assert any("eval_loss" in entry or "eval_reward" in entry for entry in trainer.state.log_history)
