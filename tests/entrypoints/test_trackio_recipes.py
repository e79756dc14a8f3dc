"""`--report_to trackio` on the command line: every recipe under configs/ takes it through its script's parser, and
the quickstart recipe trains with it in-process (tiny model, 2 steps): traces and metrics in the local trackio
project, the model card without a Space badge."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
import torch
import yaml
from helpers import load_example
from test_recipes import RECIPES
from test_scripts import quickstart_argv, run_script

trackio = pytest.importorskip("trackio", reason="trackio is not installed (the test and trackio extras have it)")


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_every_recipe_takes_report_to_trackio(path):
    recipe = yaml.safe_load(path.read_text())
    if "coevolve_method" in recipe:
        from rlce_trl.coevolution import phase as script
    else:
        script = load_example("train_hba" if "hba_task" in recipe else "train_prefeval")
    args = ["--config", str(path), "--report_to", "trackio", "--project", "my-runs", "--rlce_trackio_groups", "3"]
    if recipe.get("bf16") and not torch.cuda.is_available():
        args += ["--bf16", "false"]
    training_args = script.make_parser().parse_args_and_config(args)[1]
    assert training_args.report_to == ["trackio"] and training_args.project == "my-runs"
    assert training_args.rlce_trackio_groups == 3


def test_the_quickstart_recipe_reports_to_trackio(tiny_model_dir, tmp_path, monkeypatch):
    project = f"rlce-quickstart-{os.getpid()}"
    out = tmp_path / "quickstart"
    trainer = run_script("train_prefeval", quickstart_argv(tiny_model_dir, out, "--report_to", "trackio",
                                                           "--project", project), monkeypatch)
    assert trainer.tracking is not None and trainer.tracking.traces_sent > 0
    with sqlite3.connect(Path(trackio.utils.TRACKIO_DIR) / f"{project}.db") as db:
        keys = {k for (k,) in db.execute("SELECT key FROM traces")}
        metrics = [json.loads(m) for (m,) in db.execute("SELECT metrics FROM metrics")]
    assert keys == {"train/evidence"}
    assert sum("train/rlce/distinct_answers_mean" in m for m in metrics) == 2
    assert "Visualize in Trackio" not in (out / "README.md").read_text()  # a local project has no Space to link
