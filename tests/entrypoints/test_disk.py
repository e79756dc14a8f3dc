"""Disk (issue 42): a short CPU run with the quickstart recipe prints its first checkpoint's size and keeps one copy of
the weights (the last checkpoint's weight files are hard links to the final model's)."""

import os
import sys

from helpers import ROOT, TINY

from rlce_trl.cli import main
from rlce_trl.training.disk import folder_bytes


def test_two_step_run_prints_the_checkpoint_size_and_keeps_one_copy(tiny_model_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    monkeypatch.setattr(sys, "argv", ["rlce-trl", "train"])
    assert main(["train", "--task", str(ROOT / "examples" / "own_task" / "parity.yaml"), "--config", "quickstart",
                 "--model_name_or_path", tiny_model_dir, "--output_dir", str(out), "--max_steps", "2", *TINY]) == 0
    printed = capsys.readouterr().out
    checkpoints = sorted(out.glob("checkpoint-*"))
    assert [c.name for c in checkpoints] == ["checkpoint-2"]
    assert f"Checkpoint {checkpoints[0]}: " in printed and " on disk" in printed
    assert os.path.samefile(checkpoints[0] / "model.safetensors", out / "model.safetensors")
    assert "The last checkpoint shares the final model's weights" in printed
    weights = (out / "model.safetensors").stat().st_size
    assert folder_bytes(str(out)) < 1.5 * weights + 5_000_000  # one copy, plus small files
