"""The stock TRL CLI with no code of ours but the reward's dotted name: `RLCE_VERIFIER=<folder> trl grpo|rloo
--reward_funcs rlce_trl.rlce_reward rlce_trl.rlce_format` trains a tiny local model two steps on CPU with RLCE
rewards (the contract names of README's "From the TRL CLI")."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, clean_env
from testing_utils import preference_rows

TRL = Path(sys.executable).with_name("trl")


@pytest.mark.slow
@pytest.mark.parametrize("command", ["grpo", "rloo"])
def test_the_trl_cli_trains_with_the_rlce_reward(command, tiny_model_dir, tmp_path):
    if not TRL.exists() and shutil.which("trl") is None:
        pytest.skip("the trl command is not installed")
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in preference_rows(8)))
    (tmp_path / "rlce.yaml").write_text("rlce_validation_max_tokens: 4\nrlce_construction_max_tokens: 16\n")
    out = tmp_path / "out"
    cmd = [str(TRL) if TRL.exists() else "trl", command, "--model_name_or_path", str(tiny_model_dir),
           "--dataset_name", str(data), "--reward_funcs", "rlce_trl.rlce_reward", "rlce_trl.rlce_format",
           "--reward_weights", "0.8", "0.2", "--output_dir", str(out), "--max_steps", "2",
           "--per_device_train_batch_size", "8", "--num_generations", "4", "--max_completion_length", "8",
           "--bf16", "false", "--use_cpu", "true", "--report_to", "none", "--logging_steps", "1",
           "--save_strategy", "no", "--gradient_checkpointing", "false"]
    env = clean_env(RLCE_VERIFIER=str(tiny_model_dir), RLCE_CONFIG=str(tmp_path / "rlce.yaml"))
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=ROOT, check=False)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-3000:]
    for name in ("rlce/unscored_fraction", "rlce/failed_groups", "rlce/distinct_answers_mean",
                 "rewards/rlce_verified/mean", "rewards/rlce_format/mean"):
        assert output.count(name) >= 2, name  # logged at both steps
    assert (out / "model.safetensors").exists()


@pytest.mark.slow
def test_the_trl_cli_without_rlce_verifier_names_the_fix(tiny_model_dir, tmp_path):
    env = clean_env(RLCE_VERIFIER="")
    run = subprocess.run([sys.executable, "-c", "import rlce_trl; rlce_trl.rlce_reward"], env=env,
                         capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    assert run.returncode != 0 and "RLCE_VERIFIER is not set" in run.stderr
