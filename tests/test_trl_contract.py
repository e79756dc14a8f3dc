"""Contract tests: every TRL method `RLCEGRPOTrainer` (with its video mixin) overrides beyond the hooks TRL endorses
(`__init__`, `train`, `_calculate_rewards`, `_generate`, checkpoint save / load, the model card) has its signature in
TRL pinned and the behaviour the override relies on checked against stock `GRPOTrainer`, so that a TRL upgrade
fails here, with the method's name, rather than deep inside a training run. docs/drop-in.md lists the overrides."""

import functools
import inspect
import math

import pytest
import torch
from datasets import Dataset
from testing_utils import preference_rows
from trl import GRPOConfig, GRPOTrainer

from rlce_trl import rlce_format
from rlce_trl.trainer import RLCEGRPOTrainer
from rlce_trl.trainer_video import OVERRIDDEN, VideoGRPOMixin

#: The override points TRL's maintainers endorse (and the checkpoint and model-card methods every trainer extends).
ENDORSED = {"__init__", "train", "_calculate_rewards", "_generate", "_save_checkpoint",
            "_load_optimizer_and_scheduler", "create_model_card"}
#: The other overrides: TRL 1.16's parameters, in order, as the overrides call them.
CONTRACTS = {
    "log": ["self", "logs", "start_time"],
    "_generate_and_score_completions": ["self", "inputs"],
    "_tokenize_prompts": ["self", "prompts"],
    "_get_per_token_logps_and_entropies": [
        "self", "model", "input_ids", "attention_mask", "logits_to_keep", "batch_size", "compute_entropy",
        "compute_aux_loss", "pixel_values", "image_grid_thw", "num_images", "pixel_attention_mask", "spatial_shapes",
        "num_tiles", "image_sizes", "token_type_ids", "mm_token_type_ids", "image_position_ids"],
    "_compute_loss": ["self", "model", "inputs"],
}


def overrides() -> set[str]:
    """The GRPOTrainer methods defined again by RLCEGRPOTrainer or its mixins."""
    own = [c for c in RLCEGRPOTrainer.__mro__ if c not in GRPOTrainer.__mro__]
    return {name for c in own for name, v in vars(c).items() if callable(v) and hasattr(GRPOTrainer, name)}


def test_every_override_beyond_the_endorsed_hooks_has_a_contract():
    assert overrides() - ENDORSED == set(CONTRACTS), (
        "an override of a TRL method was added or dropped: give it a contract here and a line in docs/drop-in.md")
    assert set(OVERRIDDEN) <= set(CONTRACTS) and set(OVERRIDDEN) <= set(vars(VideoGRPOMixin))


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_trl_signature_is_the_one_the_override_was_written_against(name):
    assert list(inspect.signature(getattr(GRPOTrainer, name)).parameters) == CONTRACTS[name], name


@pytest.fixture(scope="module")
def stock(tiny_model_dir, tmp_path_factory):
    args = GRPOConfig(str(tmp_path_factory.mktemp("stock")), per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=8, report_to="none", bf16=False, use_cpu=True, logging_steps=1,
                      gradient_checkpointing=False)
    trainer = GRPOTrainer(model=tiny_model_dir, reward_funcs=rlce_format, args=args,
                          train_dataset=Dataset.from_list(preference_rows(8)))
    trainer.model.train()
    return trainer


def test_log_averages_metrics_over_the_window_and_gives_none_for_an_all_nan_one(stock):
    """`RLCEGRPOTrainer.log` removes the all-NaN entries of `_metrics[mode]` before TRL's `log` averages them."""
    stock._metrics["train"]["contract/all_nan"].extend([math.nan, math.nan])
    stock._metrics["train"]["contract/some"].extend([1.0, math.nan, 3.0])
    stock.log({})
    entry = stock.state.log_history[-1]
    assert entry["contract/all_nan"] is None and entry["contract/some"] == 2.0
    assert not stock._metrics["train"]  # cleared after each log


def test_tokenize_prompts_returns_ids_images_and_fields_and_generate_calls_it(stock):
    """The video override returns `(prompt_ids, None, fields)` and is reached from `_generate`."""
    prompt_ids, images, fields = stock._tokenize_prompts([r["prompt"] for r in preference_rows(2)])
    assert len(prompt_ids) == 2 and all(isinstance(t, int) for t in prompt_ids[0]) and isinstance(fields, dict)
    assert "self._tokenize_prompts(prompts)" in inspect.getsource(GRPOTrainer._generate)


def test_generate_and_score_completions_keeps_per_row_lists_aligned_and_loss_reads_one_forward(stock):
    """The video override adds per-row lists to the output: TRL's shuffling and splitting must move them with the rows;
    `_compute_loss` must get the micro-batch's log-probabilities through ONE `_get_per_token_logps_and_entropies`
    call, whose `model` may be a `functools.partial` (the override binds the clip's pixels to it)."""
    from trl.trainer.utils import shuffle_sequence_dict, split_tensor_dict

    output = stock._generate_and_score_completions([dict(r) for r in preference_rows(1) for _ in range(4)])
    for key in ("prompt_ids", "completion_ids", "advantages"):
        assert key in output, key
    rows = output["prompt_ids"].size(0)
    output["per_row"] = [torch.full((1,), float(i)) for i in range(rows)]
    output["row"] = torch.arange(rows)
    shuffled = shuffle_sequence_dict(output)
    assert [int(t) for t in shuffled["per_row"]] == shuffled["row"].tolist()
    halves = split_tensor_dict(shuffled, 2)
    assert [int(t) for t in halves[1]["per_row"]] == halves[1]["row"].tolist()

    calls = []
    original = stock._get_per_token_logps_and_entropies

    def counted(model, *args, **kwargs):
        calls.append(model)
        return original(functools.partial(model), *args, **kwargs)

    stock._get_per_token_logps_and_entropies = counted
    stock.current_gradient_accumulation_steps = 1  # set by the training loop
    try:
        inputs = {k: v for k, v in output.items() if k not in ("per_row", "row")}
        loss = stock._compute_loss(stock.model, inputs)
    finally:
        del stock._get_per_token_logps_and_entropies
    assert len(calls) == 1 and torch.isfinite(loss)


def test_get_per_token_logps_takes_a_partial_model_and_returns_three_values(stock):
    ids = torch.tensor([[5, 6, 7, 8]])
    mask = torch.ones_like(ids)
    direct = stock._get_per_token_logps_and_entropies(stock.model, ids, mask, 2, compute_entropy=True)
    bound = stock._get_per_token_logps_and_entropies(functools.partial(stock.model), ids, mask, 2, batch_size=1,
                                                     compute_entropy=True, mm_token_type_ids=torch.zeros_like(ids))
    assert len(direct) == 3 and direct[0].shape == (1, 2) and direct[2] is None
    assert torch.allclose(direct[0], bound[0]) and torch.allclose(direct[1], bound[1])
