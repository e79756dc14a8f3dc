"""A co-evolution train phase runs the one training pipeline (tiny real model on CPU, in this process): the recipe's
prompt suffix reaches the prompts, one row is repeated to fill the batch TRL would otherwise drop, and the phase's
output folder `<step>/model` holds the weights, the model card, the prompting record and the run report."""

import json
import sys

import pytest
from testing_utils import preference_rows

from rlce_trl.coevolution.base import PhaseSpec
from rlce_trl.coevolution.phase import run_train
from rlce_trl.methods.visplay import reasoner_row
from rlce_trl.training.recipes import resolve_recipe


def test_a_train_phase_goes_through_the_pipeline(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["phase"])  # the phase names its recipe in argv, as a training script does
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps(reasoner_row(preference_rows(1)[0], "what does it like?", "positive", 0.5)) + "\n")
    phase = PhaseSpec("reasoner", "reasoner", "visplay_reasoner", max_steps=1)
    step = tmp_path / "step"
    job = {"kind": "train", "method": "visplay", "round": 0, "step": "r0-reasoner-train", "phase": phase.to_dict(),
           "recipe": str(resolve_recipe("quickstart_visplay")), "output_dir": str(step), "seed": 0,
           "base_model": tiny_model_dir, "start_model": tiny_model_dir, "partner": None, "data_file": str(data),
           "extra_args": ["--prompt_suffix", "Answer briefly.", "--per_device_train_batch_size", "4",
                          "--max_completion_length", "4", "--dtype", "float32"]}
    result = run_train(job)
    model = step / "model"
    assert result["checkpoint"] == str(model) and result["global_step"] == 1
    assert result["rows"] == 1 and result["rows_repeated"] == 1  # 4 / G=2 = 2 prompts per batch: the row twice
    assert "reward" in result["metrics"] or "train_loss" in result["metrics"]
    assert (model / "config.json").exists() and (model / "trainer_state.json").exists()
    assert json.loads((model / "rlce_prompting.json").read_text())["prompt_suffix"] == "Answer briefly."
    card = (model / "README.md").read_text()
    assert "visplay co-evolution: reasoner phase, round 0" in card and "quickstart_visplay.yaml" in card
    assert (model / "report" / "index.html").exists()


def test_a_phase_refuses_what_it_cannot_do(tmp_path):
    from rlce_trl.coevolution.phase import parse_job_args
    from rlce_trl.errors import InputError

    job = {"recipe": str(resolve_recipe("quickstart_rlac")), "output_dir": str(tmp_path / "step")}
    with pytest.raises(InputError, match="--push_to_hub: co-evolution does not use push_to_hub: drop it"):
        parse_job_args({**job, "extra_args": ["--push_to_hub", "true"]})
    assert parse_job_args({**job, "extra_args": ["--prompt_suffix", "Be brief."]})[0].prompt_suffix == "Be brief."
