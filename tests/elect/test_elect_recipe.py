"""examples/train_elect.py in-process on the tiny model, both gates."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "train_elect.py"


def load():
    spec = importlib.util.spec_from_file_location("train_elect", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("gate", ["gold", "rlce"])
def test_recipe_trains_one_step(tiny_model_dir, tmp_path, gate):
    trainer = load().main(["--model_name_or_path", tiny_model_dir, "--gate", gate, "--output_dir", str(tmp_path),
                           "--max_steps", "1", "--rows", "4", "--max_completion_length", "8"])
    logged = [e for e in trainer.state.log_history if "rewards/elect_format/mean" in e]
    assert len(logged) == 1
    first = "rewards/elect_accuracy/mean" if gate == "gold" else "rewards/rlce_verified/mean"
    assert first in logged[0]
