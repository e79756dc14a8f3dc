"""The card and the report describe their own run (issue 42): the task's display name is the report's title, the
card's quick start shows the run's first training prompt (not the quickstart recipe's question), and the packaged
verdict calibration is named plainly where it is applied to a task it was not fitted on."""

import sys

from helpers import ROOT, TINY

from rlce_trl.cli import main


def test_own_task_card_and_report(tiny_model_dir, tmp_path, monkeypatch):
    out = tmp_path / "run"
    monkeypatch.setattr(sys, "argv", ["rlce-trl", "train"])
    assert main(["train", "--task", str(ROOT / "examples" / "own_task" / "parity.yaml"), "--config", "quickstart",
                 "--model_name_or_path", tiny_model_dir, "--output_dir", str(out), "--max_steps", "1",
                 "--save_strategy", "no", *TINY]) == 0
    card = (out / "README.md").read_text(encoding="utf-8")
    quick_start = card[card.index("## Quick start"):card.index("```\n\n", card.index("## Quick start"))]
    assert "vegetarian" not in card and "Is the number" in quick_start and "on Number parity" in quick_start
    assert "applied to this run's task anyway, which it was not fitted on" in card
    page = (out / "report" / "index.html").read_text(encoding="utf-8")
    assert "<title>rlce-trl report: Number parity</title>" in page or "rlce-trl report: Number parity" in page
