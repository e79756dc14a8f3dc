"""The reward object `RLCEReward`: the same rewards as RLCEGRPOTrainer inside a stock GRPOTrainer, pickling with a
lazily built verifier, groups found from the batch, the async form's per-group deadline, and its settings."""

import asyncio
import pickle
import time

import pytest
import torch
from datasets import Dataset
from fakes import evidence_verifier
from testing_utils import preference_rows, tiny_grpo_args

from rlce_trl import AsyncRLCEReward, RLCEGRPOTrainer, RLCEReward, rlce_format
from rlce_trl.rewards import group_size

VERDICTS = {"positive>negative": "yes", "negative>positive": "no"}
ANSWERS = [("positive", "negative", "positive", "negative"), ("positive",) * 4,
           ("negative", "positive", "negative", "negative"), ("positive", "negative", "negative", "positive")]


def _batch():
    """Four groups of four: the rows as TRL's sampler orders them, and scripted completions."""
    rows = preference_rows(4)
    inputs = [dict(row) for row in rows for _ in range(4)]
    prompts = [x["prompt"] for x in inputs]
    completions = [[{"role": "assistant", "content": f"the user likes \\boxed{{{a}}}"}] for g in ANSWERS for a in g]
    return inputs, prompts, completions


def test_stock_grpo_trainer_with_the_reward_object_gives_rlce_grpo_trainers_rewards(tiny_model_dir, tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    data = Dataset.from_list(preference_rows(16))
    ours = RLCEGRPOTrainer(model=tiny_model_dir, args=tiny_grpo_args(tmp_path / "a", rlce_redact_answers=False),
                           train_dataset=data, verifier=evidence_verifier(VERDICTS))
    stock_args = GRPOConfig(str(tmp_path / "b"), per_device_train_batch_size=16, num_generations=4,
                            max_completion_length=8, report_to="none", bf16=False, use_cpu=True,
                            reward_weights=[0.8, 0.2])
    reward = RLCEReward(evidence_verifier(VERDICTS), options=ours.args.reward_options())
    stock = GRPOTrainer(model=tiny_model_dir, args=stock_args, train_dataset=data, reward_funcs=[reward, rlce_format])

    inputs, prompts, completions = _batch()
    ids = [[0]] * len(prompts)
    got = {}
    for name, trainer in (("ours", ours), ("stock", stock)):
        trainer.model.train()
        per_func = trainer._calculate_rewards([dict(x) for x in inputs], prompts, completions, ids)
        got[name] = (per_func, (per_func * trainer.reward_weights.unsqueeze(0)).nansum(dim=1))
    assert torch.equal(got["ours"][0].isnan(), got["stock"][0].isnan())
    assert torch.equal(got["ours"][0].nan_to_num(-7), got["stock"][0].nan_to_num(-7))
    assert torch.equal(got["ours"][1], got["stock"][1])
    column = got["ours"][0][:, 0]
    assert column.isnan().sum() == 4 and (column == 1).sum() > 0  # one unscored group, a verified answer
    assert stock.reward_func_names == ["rlce_verified", "rlce_format"]
    assert stock._pending_metrics["rlce/unscored_fraction"] == [0.25]
    assert stock._pending_metrics["rlce/failed_groups"] == [0.0]


def test_the_reward_pickles_and_builds_its_verifier_in_the_calling_process(tiny_model_dir):
    reward = RLCEReward(str(tiny_model_dir), num_generations=2)
    clone = pickle.loads(pickle.dumps(reward))
    assert clone._pipeline is None
    prompts = [[{"role": "user", "content": "the user said the food yes likes"}]] * 2
    completions = [[{"role": "assistant", "content": f"\\boxed{{{a}}}"}] for a in ("positive", "negative")]
    rewards = clone(prompts, completions, answer_options=[["positive", "negative"]] * 2)
    assert len(rewards) == 2 and clone.verifier.name != "scripted"
    again = pickle.loads(pickle.dumps(clone))  # a built verifier stays behind
    assert again._pipeline is None and again.description == str(tiny_model_dir)


def test_groups_are_found_from_the_batch():
    a, b, c = "a", "b", "c"
    assert group_size([a] * 4 + [b] * 4 + [c] * 4) == 4
    assert group_size([a] * 4 + [b] * 8) == 4  # two equal rows drawn one after the other
    assert group_size([a] * 2 + [b] * 2, num_generations=2) == 2
    assert group_size([a, a, a, b, b, b]) == 3
    inputs, prompts, completions = _batch()
    reward = RLCEReward(evidence_verifier(VERDICTS))
    assert reward(prompts, completions, answer_options=[x["answer_options"] for x in inputs])[4:8] == [None] * 4


def test_the_async_form_gives_a_group_past_its_deadline_none_and_counts_it(fake_server_factory):
    def script(text, index):
        if "yes likes" in text:  # the groups of rows 1 and 3: their requests hang
            time.sleep(3)
        return "yes"

    server = fake_server_factory(script=script)
    reward = AsyncRLCEReward(server.url, group_deadline_s=1.0, options={**_options(), "verifier_max_retries": 0})
    inputs, prompts, completions = _batch()
    metrics = {}
    start = time.monotonic()
    rewards = asyncio.run(reward(prompts, completions, answer_options=[x["answer_options"] for x in inputs],
                                 log_metric=metrics.__setitem__))
    elapsed = time.monotonic() - start
    slow = [i for i, p in enumerate(prompts) if "yes likes" in p[0]["content"]]
    assert len(slow) == 8 and all(rewards[i] is None for i in slow)
    # row 3's group timed out; row 1's has one distinct answer: no verifier call, no reward, no failure
    assert metrics["rlce/failed_groups"] == 1.0 and reward.failed_groups == 1
    assert elapsed < 2.5, elapsed  # the groups ran concurrently, each stopped at its deadline
    assert len(server.requests) > 8  # the other groups went through every stage
    assert RLCEReward.__call__ is not AsyncRLCEReward.__call__


def _options():
    from rlce_trl.trl_reward import reward_options

    return reward_options()


def test_settings_come_from_rlce_config_and_bad_ones_fail_naming_the_fix(tmp_path, monkeypatch):
    from rlce_trl.errors import InputError
    from rlce_trl.trl_reward import reward_from_env

    monkeypatch.delenv("RLCE_VERIFIER", raising=False)
    with pytest.raises(InputError, match="RLCE_VERIFIER is not set"):
        reward_from_env()
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("rlce_tests_per_direction: 3\nrlce_labels_column: labels\nlearning_rate: 0.1\n")
    monkeypatch.setenv("RLCE_VERIFIER", "http://127.0.0.1:9")
    monkeypatch.setenv("RLCE_CONFIG", str(recipe))
    reward = reward_from_env()
    assert reward.settings.tests_per_direction == 3 and reward.labels_column == "labels"
    assert pickle.loads(pickle.dumps(reward)).options["rlce_tests_per_direction"] == 3
    recipe.write_text("rlce_tests_per_directon: 3\n")
    with pytest.raises(InputError, match="did you mean 'rlce_tests_per_direction'"):
        reward_from_env()
    recipe.write_text("rlce_mode: sometimes\n")
    with pytest.raises(InputError, match="rlce_mode='sometimes'"):
        reward_from_env()
