"""Ctrl-C tells the truth (issue 42): a real SIGINT after step 1 saves the checkpoint of step 1 and the report and
says where; the same command then resumes at step 2. Before the first step ends nothing is saved and the message says
so; a Ctrl-C that a library swallowed while models loaded still ends the run."""

import json
import os
import signal
import sys

import pytest
from datasets import Dataset
from helpers import ROOT, TINY
from testing_utils import preference_rows, tiny_grpo_args

from rlce_trl import RLCEGRPOTrainer
from rlce_trl.cli import main
from rlce_trl.errors import watch_interrupts

TRAINING_STEP = RLCEGRPOTrainer.training_step
TASK = str(ROOT / "examples" / "own_task" / "parity.yaml")


@pytest.fixture(autouse=True)
def default_sigint():
    # Python's own Ctrl-C handler, as in a terminal: a shell without job control that starts pytest in the
    # background (`cmd &`) leaves SIGINT ignored, and the test's SIGINT would then do nothing
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _ctrl_c_at(monkeypatch, step: int | None, calls: list[int]):
    """Count the training steps run; send the process a real SIGINT when the step after `step` begins."""
    def training_step(self, *args, **kwargs):
        calls.append(self.state.global_step + 1)
        if step is not None and self.state.global_step == step:
            os.kill(os.getpid(), signal.SIGINT)
        return TRAINING_STEP(self, *args, **kwargs)

    monkeypatch.setattr(RLCEGRPOTrainer, "training_step", training_step)


def test_ctrl_c_after_step_1_saves_and_the_same_command_resumes_at_step_2(tiny_model_dir, tmp_path, monkeypatch,
                                                                          capsys, caplog):
    out = tmp_path / "run"
    argv = ["train", "--task", TASK, "--config", "quickstart", "--model_name_or_path", tiny_model_dir, "--output_dir",
            str(out), "--max_steps", "3", "--save_strategy", "no", *TINY]
    monkeypatch.setattr(sys, "argv", ["rlce-trl", "train"])
    first: list[int] = []
    _ctrl_c_at(monkeypatch, 1, first)
    assert main(argv) == 130
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (f"interrupted after step 1: saved checkpoint {out}/checkpoint-1, report {out}/report/index.html "
                   f"(evidence trail and metrics in {out}); rerun the same command to resume at step 2")
    assert first == [1, 2] and (out / "checkpoint-1" / "trainer_state.json").is_file()
    assert (out / "report" / "index.html").is_file() and (out / "rlce_evidence.jsonl").is_file()

    second: list[int] = []
    _ctrl_c_at(monkeypatch, None, second)
    assert main(argv) == 0
    assert second == [2, 3]  # resumed at step 2
    assert "Resuming the interrupted run from" in caplog.text
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 3 and not (out / "rlce_interrupted.json").exists()
    steps = sorted({r["step"] for r in map(json.loads, (out / "rlce_evidence.jsonl").read_text().splitlines())
                    if "step" in r})
    assert steps == [1, 2, 3]  # the interrupted step's groups were dropped and redone


def test_ctrl_c_in_the_first_step_says_nothing_was_saved(tiny_model_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    monkeypatch.setattr(sys, "argv", ["rlce-trl", "train"])
    _ctrl_c_at(monkeypatch, 0, [])
    assert main(["train", "--task", TASK, "--config", "quickstart", "--model_name_or_path", tiny_model_dir,
                 "--output_dir", str(out), "--max_steps", "2", "--save_strategy", "no", *TINY]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("interrupted: nothing was saved")
    assert not list(out.glob("checkpoint-*")) and not (out / "rlce_interrupted.json").exists()


def test_a_ctrl_c_swallowed_while_loading_still_ends_the_run(tiny_model_dir, tmp_path):
    watch_interrupts()
    try:  # a fake library that catches KeyboardInterrupt while it loads a model
        os.kill(os.getpid(), signal.SIGINT)
    except KeyboardInterrupt:
        pass
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=tiny_grpo_args(tmp_path / "out", max_steps=1),
                              train_dataset=Dataset.from_list(preference_rows(16)))
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    assert trainer.state.global_step == 0
    trainer.train()  # the Ctrl-C was used up: training again in the same process (a notebook) trains
    assert trainer.state.global_step == 1
