"""GPU check, prepared case: RLCE rewards in TRL's asynchronous trainer end to end (issue 44), on two GPUs.

    python -m tools.gpu_check_async [--steps 3] [--json out.json]

The topology TRL documents for `AsyncGRPOTrainer` (experimental in TRL 1.16), with a verifier server beside it:
- GPU 0: the policy's vLLM server (`--weight-transfer-config '{"backend":"nccl"}'`: the trainer streams its weights
  into it over NCCL after each sync) and the frozen verifier's vLLM server (the initial checkpoint), sharing memory;
- GPU 1: `AsyncGRPOTrainer` with `reward_funcs=[rlce_trl.rlce_reward_async, rlce_trl.rlce_format]`; the rewards run
  in TRL's spawned, CUDA-free rollout process, whose RLCE reward builds a client of the verifier server
  (`RLCE_VERIFIER=<url>`) there.

Pass condition: the run finishes its steps (each after a weight sync into the policy server) and its logs carry both
reward columns (`rewards/rlce_verified`, `rewards/rlce_format`, averaged over each micro-batch's samples). Prints
one JSON line; exit status 0 on a pass. The CPU rehearsal of the same scoring path is
`benchmarks/async_rewards.py` (tests/verifiers/test_async_rehearsal.py).
This script has not run on GPUs yet.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TRAIN = r'''
import json, os, sys
from datasets import Dataset
from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer
import rlce_trl
model, policy_url, out, steps = sys.argv[1:5]
rows = [{"prompt": [{"role": "user", "content": f"Post {i}: the user said the food was fine, then left early. "
                     "How does the user feel? End with \\boxed{positive}, \\boxed{negative} or \\boxed{neutral}."}],
         "answer_options": ["positive", "negative", "neutral"]} for i in range(64)]
args = AsyncGRPOConfig(output_dir=out, max_steps=int(steps), num_generations=4, max_completion_length=64,
                       vllm_server_base_url=policy_url, logging_steps=1, report_to="none", save_strategy="no")
trainer = AsyncGRPOTrainer(model=model, reward_funcs=[rlce_trl.rlce_reward_async, rlce_trl.rlce_format], args=args,
                           train_dataset=Dataset.from_list(rows))
trainer.train()
json.dump(trainer.state.log_history, open(os.path.join(out, "log_history.json"), "w"))
'''


def start_policy_server(model: str, port: int, log: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--port", str(port),
           "--gpu-memory-utilization", "0.45", "--dtype", "float32", "--max-model-len", "1024",
           "--weight-transfer-config", '{"backend":"nccl"}']
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0", "VLLM_SERVER_DEV_MODE": "1"}
    return subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def wait_healthy(url: str, timeout_s: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2.0)
    raise TimeoutError(f"{url} did not become healthy within {timeout_s} s")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests"))
    from testing_utils import build_tiny_chat_model, free_port

    from rlce_trl.verifiers.vllm_process import VLLMServerProcess

    result: dict = {"case": "async_grpo_rlce", "ok": False}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = str(build_tiny_chat_model(work / "model"))
        port = free_port()
        policy = start_policy_server(model, port, work / "policy.log")
        verifier = VLLMServerProcess(model, devices="0", gpu_memory_utilization=0.3, max_model_len=1024,
                                     startup_timeout_s=600)
        start = time.perf_counter()
        try:
            wait_healthy(f"http://127.0.0.1:{port}", 600)
            verifier.start()
            env = {**os.environ, "CUDA_VISIBLE_DEVICES": "1", "RLCE_VERIFIER": verifier.base_url,
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
            run = subprocess.run([sys.executable, "-c", TRAIN, model, f"http://127.0.0.1:{port}",
                                  str(work / "out"), str(args.steps)], env=env, capture_output=True, text=True,
                                 timeout=1200, check=False)
            result["seconds"] = round(time.perf_counter() - start, 1)
            result["returncode"] = run.returncode
            if run.returncode != 0:
                result["tail"] = (run.stdout + run.stderr)[-2000:]
            else:
                history = json.loads((work / "out" / "log_history.json").read_text())
                keys = {k for entry in history for k in entry}
                result["reward_keys"] = sorted(k for k in keys if k.startswith("rewards/"))
                result["sync_keys"] = sorted(k for k in keys if "sync" in k)
                result["steps"] = max((e.get("step", 0) for e in history), default=0)
                result["ok"] = (result["steps"] >= args.steps and
                                all(any(k.startswith(name) for k in keys)
                                    for name in ("rewards/rlce_verified", "rewards/rlce_format")))
        finally:
            verifier.stop()
            policy.terminate()
            policy.wait(timeout=30)
    print(json.dumps(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
