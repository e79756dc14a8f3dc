"""No silent zero-signal run (issue 42): a tiny random policy that never writes the answer format gets a plain line
per step without signal and, after `health_signal_patience` steps, a stop with a non-zero exit, through
`RLCEGRPOTrainer` in Python and through `rlce-trl train`; the report and the model card say "no learning signal"."""

import json
import logging
import sys
from pathlib import Path

import pytest
from datasets import Dataset
from testing_utils import WORDS, build_tiny_model, preference_rows, tiny_grpo_args

from rlce_trl import RLCEGRPOTrainer
from rlce_trl.health import HEALTH_FILE, NoLearningSignalError, read_signal

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--max_completion_length", "8", "--rlce_construction_max_tokens", "16", "--rlce_validation_max_tokens", "4",
        "--rlce_equivalence_max_tokens", "8", "--learning_rate", "0.1", "--per_device_train_batch_size", "4"]


@pytest.fixture(scope="module")
def no_format_model(tmp_path_factory) -> str:
    """A tiny random policy whose vocabulary holds no `\\boxed{...}` word: it can never write an answer."""
    words = [w for w in WORDS if "boxed" not in w]
    return build_tiny_model(tmp_path_factory.mktemp("noformat") / "model", words=words)


def test_python_run_without_signal_stops_with_the_cause_and_the_fix(no_format_model, tmp_path, caplog):
    args = tiny_grpo_args(tmp_path / "out", max_steps=5, health_signal_patience=2)
    trainer = RLCEGRPOTrainer(model=no_format_model, args=args, train_dataset=Dataset.from_list(preference_rows(16)))
    with caplog.at_level(logging.WARNING, logger="rlce_trl.health"), pytest.raises(NoLearningSignalError) as error:
        trainer.train()
    assert str(error.value).startswith("no learning signal: no completion held an answer")
    assert "fix: add a format instruction" in str(error.value)
    assert trainer.state.global_step == 2 and (tmp_path / "out" / "checkpoint-2").is_dir()
    lines = [r.getMessage() for r in caplog.records if "no learning signal" in r.getMessage()]
    assert [line.split(":")[0] for line in lines] == ["step 1", "step 2"]  # one plain line per step
    assert [e["health/step_signal"] for e in trainer.state.log_history if "health/step_signal" in e] == [0.0, 0.0]
    records = read_signal(str(tmp_path / "out" / HEALTH_FILE))
    assert [(r["step"], r["cause"], r["stopped"]) for r in records] == [(1, "no_answer", False),
                                                                         (2, "no_answer", True)]
    trainer.create_model_card()
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert "Training was stopped at step 2: no learning signal" in card


def test_the_stop_can_be_turned_off(no_format_model, tmp_path):
    args = tiny_grpo_args(tmp_path / "out", max_steps=3, health_signal_patience=0)
    trainer = RLCEGRPOTrainer(model=no_format_model, args=args, train_dataset=Dataset.from_list(preference_rows(16)))
    trainer.train()
    assert trainer.state.global_step == 3 and trainer.health.had_signal is False
    trainer.create_model_card()
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert "**No learning signal**: no step of this run had one" in card


def test_a_run_with_signal_is_not_stopped(tiny_model_dir, tmp_path):
    """TTRL on the default tiny model, whose vocabulary holds two boxed labels: groups split, rewards differ."""
    args = tiny_grpo_args(tmp_path / "out", max_steps=2, reward_method="ttrl", health_signal_patience=1)
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=Dataset.from_list(preference_rows(16)))
    trainer.train()
    assert trainer.state.global_step == 2 and trainer.health.had_signal
    assert trainer.health.stopped_without_signal is None


def test_cli_run_without_signal_exits_non_zero_with_the_line_last(no_format_model, tmp_path, monkeypatch, capsys):
    from rlce_trl.cli import main

    out = tmp_path / "run"
    monkeypatch.setattr(sys, "argv", ["rlce-trl", "train"])
    code = main(["train", "--task", str(ROOT / "examples" / "own_task" / "parity.yaml"), "--config", "quickstart",
                 "--model_name_or_path", no_format_model, "--output_dir", str(out), "--max_steps", "4",
                 "--health_signal_patience", "2", *TINY])
    captured = capsys.readouterr()
    last = captured.err.strip().splitlines()[-1]
    assert code == 2 and last.startswith("error: no learning signal: no completion held an answer"), captured.err
    assert "Training completed" not in captured.out
    assert (out / "checkpoint-2").is_dir() and not (out / "model.safetensors").exists()  # one copy of the weights
    assert "no learning signal" in (out / "README.md").read_text(encoding="utf-8").lower()
    page = (out / "report" / "index.html").read_text(encoding="utf-8")
    assert '<p id="health-signal"><strong>No learning signal</strong>' in page
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 2
