"""Bad input is one `error:` line and exit status 2 at every entry point: the example scripts, the installed script
modules, `python -m rlce_trl.cli` and a multi-process launch (on every rank, without a hang), never a traceback."""

import json
import re
import subprocess
import sys

import pytest
from helpers import CONFIGS, EXAMPLES, ROOT, TINY, clean_env, free_port, torchrun

from rlce_trl.cli import main

CPU = ["--bf16", "false", "--use_cpu", "true"]  # the paper's HBA recipes are bf16 GPU runs


def run(cmd, timeout=300):
    return subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          check=False)


def quickstart(model, out, *extra):
    return ["--config", str(CONFIGS / "quickstart.yaml"), "--model_name_or_path", model, "--output_dir", str(out),
            "--max_steps", "1", *TINY, *extra]


def assert_one_error_line(done, words, ranks=1):
    """Exit status 2 (the launcher's own non-zero status for a launch), `ranks` lines `error: ...words...`, each
    whole (one `error:` per line), and no traceback of the package's own code. Where the ranks' lines fall among the
    other output (a progress bar's `\r` updates, the launcher's lines) is left open."""
    errors = [line for line in re.split(r"[\r\n]", done.stderr) if "error: " in line]
    assert len(errors) == ranks and all(words in line for line in errors), done.stderr[-3000:]
    assert all(line.count("error: ") == 1 for line in errors), errors
    assert "InputError" not in done.stderr and "rlce_trl/" not in done.stderr, done.stderr[-3000:]
    if ranks == 1:
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    else:
        assert done.returncode != 0


def test_the_example_script_prints_a_filtered_out_run_as_one_line(tiny_model_dir, tmp_path):
    """The design card's command: every row is longer than max_prompt_length (an error found after parsing)."""
    done = run([sys.executable, str(EXAMPLES / "train_prefeval.py"),
                *quickstart(tiny_model_dir, tmp_path / "o", "--max_prompt_length", "4")])
    assert_one_error_line(done, "rows are longer than max_prompt_length=4")
    assert not (tmp_path / "o" / "model.safetensors").exists()


@pytest.mark.slow  # each command starts a Python that imports TRL
@pytest.mark.parametrize("cmd, words", [
    (["-m", "rlce_trl.scripts.train_hba", "--config", str(CONFIGS / "mosei_rlce.yaml"), "--text_only", *CPU],
     "Pass --train_file"),
    (["-m", "rlce_trl.scripts.train_prefeval", "--config", "QUICKSTART", "--dataset_name", "nowhere"],
     "dataset_name='nowhere'"),
    ([str(EXAMPLES / "train_hba.py"), "--config", str(CONFIGS / "mosei_rlce.yaml"), "--num_generations", "1", *CPU],
     "num_generations=1"),  # refused by the configs' own checks while the command line is parsed
    ([str(EXAMPLES / "train_elect.py"), "--max_steps", "many"], "--max_steps"),
    (["-m", "rlce_trl.cli", "train", "--config", "QUICKSTART", "--max_prompt_length", "4"], "max_prompt_length=4"),
], ids=["hba-module", "prefeval-module", "hba-example-config", "elect-example", "cli-module"])
def test_every_script_entry_point_prints_one_line(tiny_model_dir, tmp_path, cmd, words):
    cmd = [str(CONFIGS / "quickstart.yaml") if c == "QUICKSTART" else c for c in cmd]
    done = run([sys.executable, *cmd, "--output_dir", str(tmp_path / "o"), "--model_name_or_path", tiny_model_dir])
    assert_one_error_line(done, words)


@pytest.mark.slow  # two ranks under each launcher
@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_a_multi_process_launch_prints_the_error_on_every_rank_and_ends(tiny_model_dir, tmp_path, launcher):
    if launcher == "torchrun":
        prefix = torchrun(2)
    else:  # `--cpu` would start one process (platform notes): --multi_gpu falls back to gloo on CPU
        prefix = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                  "--mixed_precision", "no", "--main_process_port", str(free_port())]
    done = run([*prefix, "-m", "rlce_trl.cli", "train",
                *quickstart(tiny_model_dir, tmp_path / "o", "--max_prompt_length", "4")], timeout=600)
    assert_one_error_line(done, "rows are longer than max_prompt_length=4", ranks=2)


def test_calibrate_export_with_nothing_to_export_is_an_error(tmp_path, capsys):
    groups, out = tmp_path / "g.jsonl", tmp_path / "q.jsonl"
    groups.write_text("")
    assert main(["calibrate", "export", "--groups", str(groups), "--output_file", str(out)]) == 2
    assert "holds no logged groups: nothing to export" in capsys.readouterr().err and not out.exists()
    calm = {"rollouts": ["a", "a", "a", "b"], "methods": {
        "rlce": {"answers": ["a", "b"], "assignment": [0, 0, 0, 1], "status": "verified", "verified_answer": "a",
                 "tests": [{"favoured": 0, "against": 1, "verdict": "yes"}]},
        "policy_judge": {"verified_answer": "a"}}}
    groups.write_text(json.dumps(calm) + "\n")
    assert main(["calibrate", "export", "--groups", str(groups), "--output_file", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "none of the 1 groups" in err and not out.exists()
