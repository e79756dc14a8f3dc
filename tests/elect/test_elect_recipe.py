"""The Elect training script (`rlce_trl.scripts.train_elect`, `examples/train_elect.py` wraps it): its shipped recipe
reaches it through `rlce-trl train`, recipe keys are its flags, and it trains in-process on the tiny model, both
gates."""

import pytest

from rlce_trl.cli import main as cli
from rlce_trl.errors import InputError
from rlce_trl.scripts.train_elect import main, parse_args
from rlce_trl.training.recipes import load_recipe, resolve_recipe

RECIPE = "elect_numbered_evidence"


def test_the_recipe_is_the_scripts_defaults_and_flags_win(tmp_path):
    path = resolve_recipe(RECIPE)
    assert load_recipe(path).module() == "rlce_trl.scripts.train_elect"
    defaults = parse_args(["--output_dir", str(tmp_path)])
    from_recipe = parse_args(["--config", str(path), "--output_dir", str(tmp_path)])
    assert vars(from_recipe) == {**vars(defaults), "recipe": path.name}  # the parser names the recipe for the card
    assert parse_args(["--config", str(path), "--output_dir", "o", "--gate", "rlce", "--rows", "8"]).gate == "rlce"


def test_bad_recipes_and_a_missing_output_dir_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("gate: gold\nnum_epochs: 3\n")
    with pytest.raises(InputError, match="unknown key 'num_epochs'"):
        parse_args(["--config", str(bad), "--output_dir", "o"])
    with pytest.raises(InputError, match="pass --output_dir"):
        parse_args([])


@pytest.mark.slow
@pytest.mark.parametrize("gate", ["gold", "rlce"])
def test_recipe_trains_one_step(tiny_model_dir, tmp_path, gate):
    trainer = main(["--model_name_or_path", tiny_model_dir, "--gate", gate, "--output_dir", str(tmp_path),
                    "--max_steps", "1", "--rows", "4", "--max_completion_length", "8"])
    logged = [e for e in trainer.state.log_history if "rewards/elect_format/mean" in e]
    assert len(logged) == 1
    first = "rewards/elect_accuracy/mean" if gate == "gold" else "rlce/unscored_fraction"
    assert first in logged[0]
    # the shared pipeline's tail, for the stock trainer too: weights, model card, curves and the run report
    for name in ("model.safetensors", "README.md", "trainer_state.json", "report/index.html"):
        assert (tmp_path / name).is_file(), name


@pytest.mark.slow
def test_rlce_trl_train_runs_the_elect_recipe(tiny_model_dir, tmp_path):
    out = tmp_path / "out"
    assert cli(["train", "--config", RECIPE, "--model_name_or_path", tiny_model_dir, "--output_dir", str(out),
                "--max_steps", "1", "--rows", "4", "--max_completion_length", "8"]) == 0


# -- Elect runs are the shared pipeline (`rlce_trl.training.pipeline.train`) ------------------------------------------
def built_trainer(monkeypatch, argv):
    """`main(argv)` through the shared pipeline up to the trainer, which is built but not trained (what
    `train_and_save` would do is recorded instead)."""
    import rlce_trl.training.pipeline as utils

    built = []
    monkeypatch.setattr(utils, "train_and_save", lambda trainer, training_args: built.append(trainer))
    trainer = main(argv)
    assert built == [trainer]
    return trainer


@pytest.mark.parametrize("gate", ["gold", "none", "rlce"])
def test_elect_runs_build_their_trainer_in_the_shared_pipeline(tiny_model_dir, tmp_path, monkeypatch, gate):
    """The gold and none gates keep the stock `GRPOTrainer` / `GRPOConfig` (paper-faithful: no RLCE class anywhere),
    rlce is `RLCEGRPOTrainer`; the Elect rewards and weights are what the run adds to the numbered-evidence rows."""
    from trl import GRPOConfig, GRPOTrainer

    from rlce_trl.config import RLCEGRPOConfig
    from rlce_trl.trainer import RLCEGRPOTrainer

    trainer = built_trainer(monkeypatch, ["--model_name_or_path", tiny_model_dir, "--gate", gate, "--output_dir",
                                          str(tmp_path), "--rows", "6", "--max_completion_length", "8"])
    stock = gate != "rlce"
    assert type(trainer) is (GRPOTrainer if stock else RLCEGRPOTrainer)
    assert type(trainer.args) is (GRPOConfig if stock else RLCEGRPOConfig)
    names = [f.__name__ for f in trainer.reward_funcs]
    assert ("elect_accuracy" in names) == (gate == "gold")
    assert {"elect_format", "elect_frame_sensitive", "elect_think_transparency", "elect_anti_repetition"} <= set(names)
    assert len(trainer.train_dataset) == 6
    assert ("solution" in trainer.train_dataset.column_names) == (gate == "gold")
    assert "gold" not in trainer.train_dataset.column_names
    assert trainer.rlce_card_info["dataset"] == "numbered evidence"  # the registry's display name (card_info)


def test_the_shared_length_filter_measures_the_elect_prompt(tiny_model_dir, tmp_path, monkeypatch):
    """`--max_prompt_length` is the pipeline's filter on the chat-templated prompt that is trained on: the kept rows
    are exactly those at most that long, and none kept is one line before any model loads."""
    from transformers import AutoTokenizer

    from rlce_trl.data.synthetic import numbered_evidence

    rows = numbered_evidence(8, seed=0, split="train", supervised=True)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    lengths = {}
    for row in rows:
        ids = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True)
        lengths[row["id"]] = len(ids["input_ids"] if hasattr(ids, "keys") else ids)
    limit = sorted(lengths.values())[len(lengths) // 2]
    assert min(lengths.values()) <= limit < max(lengths.values())
    base = ["--model_name_or_path", tiny_model_dir, "--output_dir", str(tmp_path), "--rows", "8"]
    trainer = built_trainer(monkeypatch, [*base, "--max_prompt_length", str(limit)])
    assert sorted(trainer.train_dataset["id"]) == sorted(i for i, n in lengths.items() if n <= limit)
    import rlce_trl.training.pipeline as utils

    monkeypatch.setattr(utils, "train_rlce", lambda *a, **k: pytest.fail("the trainer was built"))
    with pytest.raises(InputError, match=rf"All 8 rows are longer than max_prompt_length={min(lengths.values()) - 1}"):
        main([*base, "--max_prompt_length", str(min(lengths.values()) - 1)])


def test_lora_is_the_papers_adapter_through_the_model_arguments(tmp_path):
    """`--lora` reaches the trainer as TRL's `get_peft_config(ModelConfig)`: r=8, alpha=16, dropout 0.05 (§5.1)."""
    from trl import get_peft_config

    from rlce_trl.scripts.train_elect import elect_run

    model_args = elect_run(parse_args(["--output_dir", str(tmp_path), "--lora"]))[2]
    lora = get_peft_config(model_args)
    assert (lora.r, lora.lora_alpha, lora.lora_dropout, str(lora.task_type)) == (8, 16, 0.05, "CAUSAL_LM")
    assert get_peft_config(elect_run(parse_args(["--output_dir", str(tmp_path)]))[2]) is None
