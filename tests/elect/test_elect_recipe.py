"""The Elect training script (`rlce_trl.scripts.train_elect`, `examples/train_elect.py` wraps it): its shipped recipe
reaches it through `rlce-trl train`, recipe keys are its flags, and it trains in-process on the tiny model, both
gates."""

import pytest

from rlce_trl.cli import main as cli
from rlce_trl.errors import InputError
from rlce_trl.scripts.recipes import resolve_recipe, script_for
from rlce_trl.scripts.train_elect import main, parse_args

RECIPE = "elect_numbered_evidence"


def test_the_recipe_is_the_scripts_defaults_and_flags_win(tmp_path):
    path = resolve_recipe(RECIPE)
    assert script_for(path) == "rlce_trl.scripts.train_elect"
    defaults = parse_args(["--output_dir", str(tmp_path)])
    from_recipe = parse_args(["--config", str(path), "--output_dir", str(tmp_path)])
    assert vars(from_recipe) == vars(defaults)
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
    first = "rewards/elect_accuracy/mean" if gate == "gold" else "rewards/rlce_verified/mean"
    assert first in logged[0]


@pytest.mark.slow
def test_rlce_trl_train_runs_the_elect_recipe(tiny_model_dir, tmp_path):
    out = tmp_path / "out"
    assert cli(["train", "--config", RECIPE, "--model_name_or_path", tiny_model_dir, "--output_dir", str(out),
                "--max_steps", "1", "--rows", "4", "--max_completion_length", "8"]) == 0
