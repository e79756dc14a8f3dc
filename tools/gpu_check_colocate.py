"""GPU check of `verifier_mode="colocate"`: one RLCE GRPO training step on ONE CUDA GPU with TRL's colocated vLLM
policy engine AND the frozen verifier's vLLM server process on the same GPU, printing the GPU memory of training,
of the policy engine and of the verifier. Runs each configuration in a fresh process:

    python -m tools.gpu_check_colocate                      # TRL sleep mode off (one cold start of each engine)
    python -m tools.gpu_check_colocate --trl_sleep both     # off, then on (two configurations, up to 2 x 9 min)
    python -m tools.gpu_check_colocate --model /path/to/SmolLM2-135M-Instruct --verifier_sleep
    python -m tools.gpu_check_colocate --recipe configs/prefeval_rlce.yaml   # a recipe, scaled down
    python -m tools.gpu_check_colocate --recipe configs/prefeval_rlce.yaml --dry_run   # print its config (CPU)

`--recipe` runs one step with the recipe's own settings (GRPO, rollouts, the two vLLM engines' shares, tensor
parallel and sleep settings, RLCE) through the trainer's own `verifier_mode="colocate"` path (the trainer starts the
verifier server), scaled down to one GPU: a tiny model, 1-2 prompts, short lengths (`scale_down`).

Needs an environment with CUDA vLLM (0.22-0.31 for TRL 1.16), trl==1.16.*, and this package (`pip install -e .`).
The verifier server runs on the same interpreter unless `RLCE_VLLM_PYTHON` names another. Nothing is downloaded:
the default model is a tiny random Llama (head size 64) built locally.

How the memory figures are taken (device-wide `torch.cuda.mem_get_info()`, sampled every 50 ms in a background
thread, and PyTorch's allocator; no NVML, whose per-process view containers may hide):
- verifier   = device memory in use after the verifier server started minus before (its reservation), and its
               budget `--verifier-mem` x total;
- policy eng = device memory taken by `RLCEGRPOTrainer(...)` (model + TRL's vLLM engine) minus the policy
               parameters' bytes (budget `--policy-mem` x total);
- training   = `torch.cuda.max_memory_allocated()` during `trainer.train()` (PyTorch's allocator: model,
               gradients, optimizer states, activations; also vLLM tensors allocated through torch);
- GPU used   = the device-wide peak over the whole run.
Exit status 0 when every configuration trained one step with verifier calls and no failed verifier request. This
script runs one process without DeepSpeed; `tools/gpu_check.py --vllm` runs the same topology under
`accelerate launch` with ZeRO-3.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

GIB = 1024**3


def build_tiny_model(directory: Path) -> str:
    """The tests' tiny chat model (tests/testing_utils.py) at GPU-check size: 256 / 4 = head size 64, which vLLM
    needs, and positions for `--max-model-len` up to 4096."""
    from tests.testing_utils import build_tiny_chat_model

    return str(build_tiny_chat_model(directory, hidden_size=256, num_heads=4, max_positions=4096))


class GpuSampler:
    """Peak device-wide GPU memory in use (`torch.cuda.mem_get_info`), sampled in a thread. Device-wide, so it does
    not depend on NVML seeing this container's processes (and needs no NVML binding)."""

    def __init__(self, index: int = 0, period_s: float = 0.05):
        import torch

        self.index = index
        self.total = torch.cuda.mem_get_info(index)[1]
        self.period_s = period_s
        self.peak_used = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def used(self) -> int:
        import torch

        free, total = torch.cuda.mem_get_info(self.index)
        return total - free

    def _run(self):
        while not self._stop.is_set():
            self.peak_used = max(self.peak_used, self.used())
            time.sleep(self.period_s)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=5)


#: What `--recipe` shrinks (everything else keeps the recipe's value).
SCALED_DOWN = {
    "max_steps": 1, "per_device_train_batch_size": 8, "gradient_accumulation_steps": 1, "max_completion_length": 32,
    "vllm_max_model_length": 2048, "rlce_construction_max_tokens": 32,
    "rlce_validation_max_tokens": 4, "rlce_equivalence_max_tokens": 64, "logging_steps": 1, "report_to": "none",
    "save_strategy": "no", "gradient_checkpointing": False, "activation_checkpointing": False, "seed": 0,
}
#: Recipe keys that are not RLCEGRPOConfig fields (script and model arguments).
NOT_CONFIG = {"script", "model_name_or_path", "dtype", "dataset_name", "prefeval_form", "hba_task",
              "max_prompt_length", "prompt_suffix", "validation_steps", "judge_base_url", "judge_model", "train_file",
              "validation_file", "media_root", "output_dir", "tta_split", "tta_passes", "tta_eval_base"}


def scale_down(recipe_path: str, output_dir: str, use_cpu: bool = False) -> dict:
    """The RLCEGRPOConfig keyword arguments of `recipe_path` for a one-step, one-GPU run of its settings."""
    import yaml

    recipe = yaml.safe_load(Path(recipe_path).read_text())
    kwargs = {k: v for k, v in recipe.items() if k not in NOT_CONFIG}
    kwargs.update(SCALED_DOWN, output_dir=output_dir)
    G = kwargs.get("num_generations", 4)
    kwargs["per_device_train_batch_size"] = max(G, kwargs["per_device_train_batch_size"] // G * G)
    kwargs["generation_batch_size"] = kwargs["per_device_train_batch_size"]  # one generation per step
    if use_cpu:  # --dry-run on a machine without a GPU: the config must still be valid
        kwargs.update(bf16=False, use_cpu=True)
    return kwargs


def recipe_configuration(args) -> dict:
    """One step with a recipe's settings scaled down, the verifier started by the trainer (verifier_mode colocate)."""
    import torch

    from rlce_trl import RLCEGRPOConfig, RLCEGRPOTrainer
    from rlce_trl.data.sample import load_preference_sample

    assert torch.cuda.is_available(), "this check needs a CUDA GPU"
    from datasets import Dataset

    work = Path(tempfile.mkdtemp(prefix="rlce-gpu-recipe-"))
    model = args.model or build_tiny_model(work / "tiny-model")
    config = RLCEGRPOConfig(**scale_down(args.recipe, str(work / "out")))
    sampler = GpuSampler(0).start()
    rows = load_preference_sample("train")[: config.generation_batch_size // config.num_generations]
    used_0 = sampler.used()
    t0 = time.perf_counter()
    trainer = RLCEGRPOTrainer(model=model, args=config, train_dataset=Dataset.from_list(rows))
    init_s = time.perf_counter() - t0
    used_1 = sampler.used()
    try:
        torch.cuda.reset_peak_memory_stats()
        t1 = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - t1
        train_torch_peak = torch.cuda.max_memory_allocated()
        logs = [e for e in trainer.state.log_history if "rlce/unscored_fraction" in e]
    finally:
        trainer.verifier.close()
        sampler.stop()
    result = {
        "recipe": Path(args.recipe).name, "model": model, "gpu_total_gib": sampler.total / GIB,
        "verifier_mode": config.verifier_mode, "verifier_budget_gib": config.verifier_gpu_memory_utilization
        * sampler.total / GIB, "policy_engine_budget_gib": config.vllm_gpu_memory_utilization * sampler.total / GIB,
        # device-wide: the verifier server, the policy and TRL's engine, all started by the trainer's __init__
        "trainer_init_delta_gib": (used_1 - used_0) / GIB,
        "training_torch_peak_gib": train_torch_peak / GIB, "gpu_used_peak_gib": sampler.peak_used / GIB,
        "seconds": {"trainer_init": init_s, "train_step": train_s},
        "verifier_seconds": sum(e.get("rlce/verifier_seconds", 0.0) for e in logs),
        "verifier_calls": sum(e.get("rlce/verifier_calls", 0) for e in logs),
        "verifier_failed_requests": sum(e.get("rlce/verifier_failed_requests", 0) for e in logs),
        "steps_logged": len(logs),
    }
    result["verifier_share"] = result["verifier_seconds"] / max(train_s, 1e-9)  # of the one step
    result["ok"] = (result["steps_logged"] == 1 and result["verifier_calls"] >= 1
                    and result["verifier_failed_requests"] == 0)
    return result


def one_configuration(args) -> dict:
    import torch

    from rlce_trl import RLCEGRPOConfig, RLCEGRPOTrainer
    from rlce_trl.data.sample import load_preference_sample
    from rlce_trl.verifiers.colocate import ColocatedVLLMVerifier
    from rlce_trl.verifiers.vllm_process import VLLMServerProcess

    assert torch.cuda.is_available(), "this check needs a CUDA GPU"
    from datasets import Dataset

    work = Path(tempfile.mkdtemp(prefix="rlce-gpu-check-"))
    model = args.model or build_tiny_model(work / "tiny-model")
    sampler = GpuSampler(0).start()
    device_used = sampler.used  # device-wide: needs no view of other processes (containers hide them from NVML)
    used_0 = device_used()

    # 1. The verifier server first, alone on the GPU: vLLM checks free memory >= its share and profiles undisturbed.
    t0 = time.perf_counter()
    process = VLLMServerProcess(
        model, gpu_memory_utilization=args.verifier_mem, max_model_len=args.max_model_len, seed=0,
        enforce_eager=not args.cuda_graphs, enable_sleep_mode=args.verifier_sleep, startup_timeout_s=600,
    )
    verifier = ColocatedVLLMVerifier(process, sleep_between_calls=args.verifier_sleep, timeout_s=300)
    verifier_start_s = time.perf_counter() - t0
    used_1 = device_used()

    try:
        # 2. The trainer: policy model + TRL's colocated vLLM engine in this process.
        config = RLCEGRPOConfig(
            output_dir=str(work / "out"), max_steps=1, per_device_train_batch_size=8, num_generations=4,
            max_completion_length=32, learning_rate=1e-5, logging_steps=1, report_to="none", save_strategy="no",
            bf16=True, gradient_checkpointing=False, seed=0, use_vllm=True, vllm_mode="colocate",
            vllm_gpu_memory_utilization=args.policy_mem, vllm_enable_sleep_mode=args.trl_sleep == "on",
            vllm_max_model_length=args.max_model_len, rlce_construction_max_tokens=32,
            rlce_validation_max_tokens=4, rlce_equivalence_max_tokens=64,
        )
        rows = load_preference_sample("train")[:8]
        t1 = time.perf_counter()
        trainer = RLCEGRPOTrainer(model=model, args=config, train_dataset=Dataset.from_list(rows), verifier=verifier)
        trainer_init_s = time.perf_counter() - t1
        torch.cuda.synchronize()
        used_2 = device_used()
        param_bytes = sum(p.numel() * p.element_size() for p in trainer.model.parameters())
        torch.cuda.reset_peak_memory_stats()
        t2 = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - t2
        torch.cuda.synchronize()
        train_torch_peak = torch.cuda.max_memory_allocated()
        logs = [e for e in trainer.state.log_history if "rlce/unscored_fraction" in e]
    finally:
        verifier.close()
        sampler.stop()
    result = {
        "trl_sleep_mode": args.trl_sleep, "verifier_sleep": args.verifier_sleep, "model": model,
        "gpu_total_gib": sampler.total / GIB,
        "verifier_budget_gib": args.verifier_mem * sampler.total / GIB,
        # device-wide deltas: what the verifier server took at start (its reservation), what the policy and TRL's
        # engine took beyond the policy's parameters
        "verifier_gib": (used_1 - used_0) / GIB,
        "policy_engine_budget_gib": args.policy_mem * sampler.total / GIB,
        "policy_engine_gib": max(used_2 - used_1 - param_bytes, 0) / GIB,
        "training_torch_peak_gib": train_torch_peak / GIB,
        "gpu_used_peak_gib": sampler.peak_used / GIB,
        "seconds": {"verifier_start": verifier_start_s, "trainer_init": trainer_init_s, "train_step": train_s},
        "verifier_seconds": sum(e.get("rlce/verifier_seconds", 0.0) for e in logs),
        "verifier_calls": sum(e.get("rlce/verifier_calls", 0) for e in logs),
        "verifier_failed_requests": sum(e.get("rlce/verifier_failed_requests", 0) for e in logs),
        "steps_logged": len(logs),
    }
    result["ok"] = result["steps_logged"] == 1 and result["verifier_calls"] >= 1 and \
        result["verifier_failed_requests"] == 0
    return result


def step_report(result: dict) -> str:
    """One co-located step in a line: step time, the verifier's seconds and share of it, and peak GPU memory per
    part (the verifier server's start, TRL's policy engine, training in PyTorch's allocator)."""
    step = result["seconds"]["train_step"]
    verifier = result.get("verifier_seconds", 0.0)
    return (
        f"TRL sleep {result['trl_sleep_mode']}: step {step:.1f} s, verifier {verifier:.1f} s "
        f"({verifier / step if step else 0.0:.0%} of the step); memory: verifier "
        f"{result['verifier_gib']:.2f} GiB, policy engine {result['policy_engine_gib']:.2f} GiB, training "
        f"{result['training_torch_peak_gib']:.2f} GiB (GPU used at peak {result['gpu_used_peak_gib']:.2f} GiB)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="checkpoint folder (default: a tiny random Llama built here)")
    parser.add_argument("--trl_sleep", "--trl-sleep", choices=["off", "on", "both"], default="off",
                        help="TRL's vllm_enable_sleep_mode for its colocated policy engine")
    parser.add_argument("--verifier_sleep", "--verifier-sleep", action="store_true",
                        help="also put the verifier server to sleep between calls (its own sleep allocator)")
    parser.add_argument("--policy_mem", "--policy-mem", type=float, default=0.15,
                        help="vllm_gpu_memory_utilization (TRL)")
    parser.add_argument("--verifier_mem", "--verifier-mem", type=float, default=0.10,
                        help="verifier_gpu_memory_utilization")
    parser.add_argument("--max_model_len", "--max-model-len", type=int, default=2048)
    parser.add_argument("--cuda_graphs", "--cuda-graphs", action="store_true",
                        help="do not pass --enforce-eager to the verifier")
    parser.add_argument("--recipe", help="run one step of this recipe's settings, scaled down (see scale_down)")
    parser.add_argument("--dry_run", "--dry-run", action="store_true",
                        help="with --recipe: build and print the config, no GPU")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    if args.recipe and args.dry_run:
        from rlce_trl import RLCEGRPOConfig

        kwargs = scale_down(args.recipe, tempfile.mkdtemp(prefix="rlce-gpu-recipe-"), use_cpu=True)
        config = RLCEGRPOConfig(**kwargs)  # the same checks a real run makes
        print(json.dumps({k: getattr(config, k) for k in sorted(kwargs)}, indent=1, default=str))
        return 0
    if args.recipe and not args.child:
        print(json.dumps(recipe_configuration(args), indent=1))
        return 0
    if args.child:
        print("RESULT " + json.dumps(one_configuration(args)), flush=True)
        return 0

    results = []
    for mode in (["off", "on"] if args.trl_sleep == "both" else [args.trl_sleep]):
        argv = [sys.executable, "-m", "tools.gpu_check_colocate", "--child", "--trl-sleep", mode,
                "--policy-mem", str(args.policy_mem), "--verifier-mem", str(args.verifier_mem), "--max-model-len",
                str(args.max_model_len)]
        argv += (["--model", args.model] if args.model else []) + (["--verifier-sleep"] if args.verifier_sleep else [])
        argv += ["--cuda-graphs"] if args.cuda_graphs else []
        print(f"=== TRL sleep mode {mode}: {' '.join(argv)}", flush=True)
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=540,
                              check=False)
        lines = proc.stdout.splitlines()
        found = [json.loads(line[7:]) for line in lines if line.startswith("RESULT ")]
        if proc.returncode != 0 or not found:
            print("\n".join(lines[-60:]))
            results.append({"trl_sleep_mode": mode, "ok": False, "returncode": proc.returncode})
            continue
        results.append(found[0])

    print("\nsleep  verifier(start/budget)  policy engine(est/budget)  training(torch peak)  GPU used  step s  ok")
    for r in results:
        if "verifier_gib" not in r:
            print(f"{r['trl_sleep_mode']:<6} FAILED (exit {r.get('returncode')})")
            continue
        print(f"{r['trl_sleep_mode']:<6} {r['verifier_gib']:7.2f} / {r['verifier_budget_gib']:6.2f} GiB"
              f"       {r['policy_engine_gib']:7.2f} / {r['policy_engine_budget_gib']:6.2f} GiB"
              f"      {r['training_torch_peak_gib']:7.2f} GiB       {r['gpu_used_peak_gib']:6.2f}"
              f"  {r['seconds']['train_step']:6.1f}  {r['ok']}")
    print("\n".join(step_report(r) for r in results if "verifier_gib" in r))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0 if results and all(r.get("ok") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
