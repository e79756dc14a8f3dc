"""GPU check: RLCE training on one GPU under `accelerate launch` with DeepSpeed ZeRO-3 on one process, the frozen
verifier on the transformers backend (`use_vllm: false`, `verifier_mode: transformers`), in under 10 minutes, with
nothing downloaded and nothing beyond the package's extras:

    PYTHONPATH=src python -m tools.gpu_check                   # tiny random model + a 2B Qwen3.5 (hybrid)
    PYTHONPATH=src python -m tools.gpu_check --arch qwen3-1.7b  # another architecture from ARCHS
    PYTHONPATH=src python -m tools.gpu_check --no-deepspeed     # where DeepSpeed is not installed (reported)
    PYTHONPATH=src python -m tools.gpu_check --vllm             # machines with CUDA vLLM: TRL's colocated policy
                                                                  #   engine and one colocated vLLM verifier server
    PYTHONPATH=src python -m tools.gpu_check --device cpu       # dry mode: the same code path on CPU (tests)

Two runs, each in its own `accelerate launch` (ZeRO-3 config from `configs/accelerate/zero3.yaml`, one process):
1. `tiny`: a tiny random Llama with a locally trained tokenizer: the mechanics (ZeRO-3 init, rollouts, verifier
   requests, the gathered reward path, an optimizer step).
2. `paper`: a randomly initialised checkpoint of the paper's architecture family built on the GPU from a config
   (`ARCHS`; weights random, tokenizer a word-level vocabulary of the architecture's size, so every sampled id decodes
   to text the verifier reads): step time, verifier seconds and their share of the step, peak memory at real size.

Memory is PyTorch's own `torch.cuda.max_memory_allocated()` (this process's allocator: model, gradients, optimizer
states, activations, the verifier copy), not NVML's per-process view, which containers may hide. The pass condition:
every run finished its steps under ZeRO-3 stage 3 (unless `--no-deepspeed`), the verifier answered (calls > 0, no
failed request) and every logged loss is finite. Exit status 0 on a pass. `--json` writes the figures.

Needs torch, transformers, accelerate and this package's dependencies TRL and datasets (DeepSpeed for ZeRO-3); see
docs/gpu-check.md for carrying them as wheels to a machine without network.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GIB = 1024**3

#: Architectures built from a config (no download); weights random. `qwen3.5-*` are the paper's family (Qwen3.5:
#: Gated DeltaNet linear-attention layers, every fourth layer full attention with an output gate, the 248,320-token
#: vocabulary, tied embeddings) at the 2B size class that one GPU trains in full under ZeRO-3 within the check's
#: minutes (the paper's 9B would need about 150 GB for weights, gradients and Adam states alone); the qwen3 entries
#: are the shapes of the released Qwen3 checkpoints' configs (plain attention), kept for comparison.
QWEN35 = dict(vocab_size=248320, max_position_embeddings=32768, rms_norm_eps=1e-6, tie_word_embeddings=True,
              linear_conv_kernel_dim=4, linear_key_head_dim=128, linear_value_head_dim=128, linear_num_key_heads=16,
              linear_num_value_heads=16, head_dim=256)
ARCHS = {
    "qwen3.5-2b": dict(QWEN35, hidden_size=2048, intermediate_size=6144, num_hidden_layers=24, num_attention_heads=8,
                       num_key_value_heads=2),
    # the same architecture and vocabulary, one linear-attention and one full-attention layer: the CPU dry mode
    "qwen3.5-test": dict(QWEN35, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                         num_key_value_heads=1, head_dim=32, linear_key_head_dim=16, linear_value_head_dim=16,
                         linear_num_key_heads=2, linear_num_value_heads=2,
                         layer_types=["linear_attention", "full_attention"]),
    "qwen3-1.7b": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, vocab_size=151936, max_position_embeddings=40960,
                       rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True),
    "qwen3-0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, vocab_size=151936, max_position_embeddings=40960,
                       rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True),
    # the same architecture and vocabulary, two thin layers
    "qwen3-test": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                       num_key_value_heads=1, head_dim=32, vocab_size=151936, max_position_embeddings=40960,
                       rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True),
}

#: Run sizes: (prompts per step, G, completion tokens, construction / validation / equivalence tokens, steps).
SIZES = {
    "tiny": dict(prompts=2, num_generations=4, max_completion_length=16, construction=16, validation=4,
                 equivalence=16, steps=2),
    # the paper recipes' per-group settings (G=4, 1 test per direction), shorter completions to stay in minutes
    "paper": dict(prompts=2, num_generations=4, max_completion_length=256, construction=48, validation=4,
                  equivalence=96, steps=3),
}



def run_size(size: str, device: str) -> dict:
    """The settings of run `size`; on CPU (dry mode) every run takes the tiny settings (the code path, not figures)."""
    return SIZES[size if device == "cuda" else "tiny"]


CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>"]


# -- models ---------------------------------------------------------------------------------------------------------
def word_tokenizer(vocab_size: int, corpus_words: list[str]):
    """A word-level tokenizer with exactly `vocab_size` entries: the special tokens, the words of the prompts the run
    uses, then filler words `w<k>`. Every id decodes to a word, so the text a random model samples is readable by
    the verifier's prompts (as free text)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    for word in ["system", "user", "assistant", *corpus_words]:  # the chat roles first
        if len(vocab) < vocab_size:
            vocab.setdefault(word, len(vocab))
    k = 0
    while len(vocab) < vocab_size:
        vocab.setdefault(f"w{k}", len(vocab))
        k += 1
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", pad_token="<|endoftext|>",
                                        eos_token="<|im_end|>", bos_token=None,
                                        additional_special_tokens=["<|im_start|>"])
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def corpus_words() -> list[str]:
    """The words of the bundled preference sample and of the verifier's prompts (a small, fixed vocabulary core)."""
    import re

    from rlce_trl.data.sample import load_preference_sample

    text = " ".join(json.dumps(r["prompt"]) for r in load_preference_sample("train"))
    text += " yes no unknown same different Answer A B claim supported input test evidence boxed { } \\"
    return sorted(set(re.findall(r"\w+|[^\w\s]", text)))


def build_model(kind: str, arch: str, directory: Path, device: str) -> dict:
    """Build and save the `tiny` or `paper` checkpoint; returns what was built."""
    import torch
    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        Qwen3_5ForCausalLM,
        Qwen3_5TextConfig,
        Qwen3Config,
        Qwen3ForCausalLM,
    )

    words = corpus_words()
    t0 = time.perf_counter()
    if kind == "tiny":
        tokenizer = word_tokenizer(len(SPECIALS) + 3 + len(words), words)
        config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                             tie_word_embeddings=True)
        model_cls, dtype = LlamaForCausalLM, torch.float32
    else:
        shapes = ARCHS[arch]
        tokenizer = word_tokenizer(shapes["vocab_size"], words)
        hybrid = arch.startswith("qwen3.5")
        config = (Qwen3_5TextConfig if hybrid else Qwen3Config)(**shapes)
        model_cls = Qwen3_5ForCausalLM if hybrid else Qwen3ForCausalLM
        dtype = torch.bfloat16 if device == "cuda" else torch.float32
    config.pad_token_id = tokenizer.pad_token_id
    config.eos_token_id = tokenizer.eos_token_id
    config.bos_token_id = None
    torch.manual_seed(0)
    with torch.device(device if device == "cuda" else "cpu"):  # random init on the GPU: seconds at 1.7B
        model = model_cls(config).to(dtype)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    params = sum(p.numel() for p in model.parameters())
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return {"path": str(directory), "arch": "llama-tiny" if kind == "tiny" else arch, "params": params,
            "dtype": str(dtype).removeprefix("torch."), "build_seconds": time.perf_counter() - t0}


# -- one run (inside accelerate launch) ----------------------------------------------------------------------------
def train_once(args) -> dict:
    """One RLCE training run of `args.size` on `args.model`; the figures of the run."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback

    from rlce_trl import RLCEGRPOConfig, RLCEGRPOTrainer
    from rlce_trl.data.sample import load_preference_sample

    size = run_size(args.size, args.device)
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("--device cuda but torch sees no CUDA device: run on the GPU machine, or pass --device cpu.")
    deepspeed = os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true"
    batch = size["prompts"] * size["num_generations"]
    config = dict(
        output_dir=args.output_dir, max_steps=size["steps"], per_device_train_batch_size=batch,
        gradient_accumulation_steps=1, num_generations=size["num_generations"],
        max_completion_length=size["max_completion_length"], learning_rate=1e-6, beta=0.0, logging_steps=1,
        report_to="none", save_strategy="no", seed=0, bf16=cuda, use_cpu=not cuda and not deepspeed,
        gradient_checkpointing=args.size == "paper", temperature=1.0, top_p=0.95, top_k=20,
        rlce_construction_max_tokens=size["construction"], rlce_validation_max_tokens=size["validation"],
        rlce_equivalence_max_tokens=size["equivalence"], rlce_tests_per_direction=1,
        use_vllm=False, verifier_mode="transformers", model_init_kwargs={"dtype": "bfloat16" if cuda else "float32"},
    )
    if not cuda and deepspeed:
        config["ddp_backend"] = "gloo"
    if args.vllm:  # the paper's topology: TRL's colocated policy engine and one colocated vLLM verifier server
        config.update(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.25,
                      verifier_mode="colocate", verifier_gpu_memory_utilization=0.18)
    rows = load_preference_sample("train")[: size["prompts"] * size["steps"]]

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.started, self.seconds = 0.0, []

        def on_step_begin(self, *_, **__):
            if cuda:
                torch.cuda.synchronize()
            self.started = time.perf_counter()

        def on_step_end(self, *_, **__):
            if cuda:
                torch.cuda.synchronize()
            self.seconds.append(time.perf_counter() - self.started)

    timer = StepTimer()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    trainer = RLCEGRPOTrainer(model=args.model, args=RLCEGRPOConfig(**config),
                              train_dataset=Dataset.from_list(rows), callbacks=[timer])
    init_seconds = time.perf_counter() - t0
    try:
        trainer.train()
    finally:
        trainer.verifier.close()
    logs = [e for e in trainer.state.log_history if "rlce/unscored_fraction" in e]
    plugin = trainer.accelerator.state.deepspeed_plugin
    verifier_seconds = [e.get("rlce/verifier_seconds", 0.0) for e in logs]
    return {
        "size": args.size, "model": args.model, "device": args.device, "vllm": args.vllm,
        "deepspeed": bool(trainer.is_deepspeed_enabled), "zero_stage": plugin.zero_stage if plugin else None,
        "num_processes": trainer.accelerator.num_processes, "torch": torch.__version__,
        "transformers": __import__("transformers").__version__, "trl": __import__("trl").__version__,
        "gpu": torch.cuda.get_device_name(0) if cuda else None, "init_seconds": init_seconds,
        "steps": trainer.state.global_step, "step_seconds": timer.seconds, "verifier_seconds": verifier_seconds,
        "verifier_calls": sum(e.get("rlce/verifier_calls", 0.0) for e in logs),
        "verifier_failed_requests": sum(e.get("rlce/verifier_failed_requests", 0.0) for e in logs),
        "losses": [e["loss"] for e in trainer.state.log_history if "loss" in e],
        "peak_memory_gib": torch.cuda.max_memory_allocated() / GIB if cuda else None,
        "batch": {"prompts": size["prompts"], "num_generations": size["num_generations"],
                  "max_completion_length": size["max_completion_length"]},
    }


def judge(result: dict, steps: int, want_zero3: bool) -> dict:
    """The pass condition of one run (no NVML): its steps finished, under ZeRO-3 when asked, the verifier answered,
    every logged loss is finite. Adds `ok`, `problems`, and the verifier's share of the steps after the first (the
    first pays one-off costs)."""
    problems = []
    if result.get("steps") != steps:
        problems.append(f"{result.get('steps')} of {steps} steps")
    if want_zero3 and result.get("zero_stage") != 3:
        problems.append(f"not under ZeRO-3 (deepspeed={result.get('deepspeed')}, stage {result.get('zero_stage')})")
    if not result.get("verifier_calls"):
        problems.append("the verifier was never asked")
    if result.get("verifier_failed_requests"):
        problems.append(f"{result['verifier_failed_requests']:g} failed verifier requests")
    if not result.get("losses") or not all(math.isfinite(x) for x in result["losses"]):
        problems.append(f"losses {result.get('losses')}")
    timed = slice(1, None) if len(result.get("step_seconds", [])) > 1 else slice(None)
    step_s = sum(result.get("step_seconds", [])[timed])
    verifier_s = sum(result.get("verifier_seconds", [])[timed])
    return {**result, "ok": not problems, "problems": problems, "verifier_share": verifier_s / step_s if step_s else
            None, "mean_step_seconds": step_s / max(len(result.get("step_seconds", [])[timed]), 1)}


def report_line(result: dict) -> str:
    """One run in a line: step time, verifier seconds and share, peak memory, pass or the problems."""
    if "step_seconds" not in result:
        return f"{result['size']}: FAILED ({'; '.join(result.get('problems', []))})"
    memory = f"{result['peak_memory_gib']:.2f} GiB" if result.get("peak_memory_gib") is not None else "n/a (CPU)"
    share = f"{result['verifier_share']:.0%}" if result.get("verifier_share") is not None else "n/a"
    timed = result["step_seconds"][1:] or result["step_seconds"]
    verifier = result["verifier_seconds"][1:] or result["verifier_seconds"]
    stage = f"ZeRO-{result['zero_stage']}" if result.get("deepspeed") else "no DeepSpeed"
    return (f"{result['size']} ({result.get('arch', '?')}, {result.get('params', 0) / 1e6:.1f} M params, {stage}, "
            f"{result['device']}): step {result['mean_step_seconds']:.1f} s (mean of {len(timed)}), verifier "
            f"{sum(verifier) / len(verifier):.1f} s ({share} of the step), peak memory {memory}; "
            + ("PASS" if result["ok"] else "FAIL: " + "; ".join(result["problems"])))


# -- the driver ------------------------------------------------------------------------------------------------------
def preflight(args) -> list[str]:
    """What is missing, each with its fix, before anything is built."""
    import importlib.util

    missing = []
    for name, fix in (("trl", "carry the trl wheel"), ("datasets", "carry the datasets wheel (and its dill, "
                      "xxhash, multiprocess wheels)"), ("rlce_trl", "run from the repository with PYTHONPATH=src "
                      "or install this package's wheel")):
        if importlib.util.find_spec(name) is None:
            missing.append(f"{name} is not importable: {fix} (docs/gpu-check.md).")
    if not args.no_deepspeed and importlib.util.find_spec("deepspeed") is None:
        missing.append("deepspeed is not importable: carry its wheel (docs/gpu-check.md), or pass --no-deepspeed.")
    if args.vllm and importlib.util.find_spec("vllm") is None:
        missing.append("--vllm needs CUDA vLLM (0.22-0.31) in this environment: drop --vllm on machines without it.")
    return missing


def accelerate_config(path: Path, device: str, deepspeed: bool) -> Path:
    """`configs/accelerate/zero3.yaml` for one process (bf16 on the GPU, fp32 on CPU), or a plain one-process
    config."""
    import yaml

    if deepspeed:
        config = yaml.safe_load((ROOT / "configs" / "accelerate" / "zero3.yaml").read_text())
    else:
        config = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "NO", "machine_rank": 0,
                  "num_machines": 1, "use_cpu": device == "cpu"}
    config.update(num_processes=1, mixed_precision="bf16" if device == "cuda" else "no")
    path.write_text(yaml.safe_dump(config))
    return path


def launch(args, size: str, model: str, work: Path, timeout_s: int) -> dict:
    """One run in its own `accelerate launch`; its result, or the reason it failed."""
    out = work / f"{size}-result.json"
    config = accelerate_config(work / "accelerate.yaml", args.device, not args.no_deepspeed)
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config), "--num_processes", "1",
           "--main_process_port", str(args.port), str(Path(__file__).resolve()), "--child", "--size", size,
           "--model", model, "--device", args.device, "--output-dir", str(work / f"{size}-out"), "--result", str(out)]
    cmd += ["--vllm"] if args.vllm else []
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1", TRANSFORMERS_VERBOSITY="error",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])))
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    print(f"=== {size}: {' '.join(cmd)}", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        log, _ = proc.communicate(timeout=timeout_s)
        failed = proc.returncode != 0 and f"exit status {proc.returncode}"
    except subprocess.TimeoutExpired:  # the launcher and its workers (which hold the pipe): none outlives the check
        from tests.distributed.launching import kill_tree  # `python -m tools.gpu_check` from the repository root

        kill_tree(proc.pid)
        log, _ = proc.communicate(timeout=60)
        failed = f"still running after {timeout_s} s (killed)"
    (work / f"{size}.log").write_text(log)
    if failed or not out.exists():
        print("\n".join(log.splitlines()[-40:]))
        return {"size": size, "ok": False, "problems": [failed or "no result written"],
                "wall_seconds": time.perf_counter() - t0}
    result = json.loads(out.read_text())
    result["wall_seconds"] = time.perf_counter() - t0
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu: dry mode, the same code path on tiny models (no GPU figures)")
    parser.add_argument("--arch", choices=sorted(ARCHS), default=None,
                        help="the `paper` run's architecture (default qwen3.5-2b on cuda, qwen3.5-test on cpu)")
    parser.add_argument("--runs", default="tiny,paper", help="comma-separated: tiny, paper")
    parser.add_argument("--no-deepspeed", action="store_true", help="plain one-process accelerate (no ZeRO-3)")
    parser.add_argument("--vllm", action="store_true", help="TRL's colocated vLLM engine + a colocated vLLM verifier")
    parser.add_argument("--workdir", help="where models and logs go (default: a new temporary folder)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--port", type=int, default=29533, help="accelerate's main process port")
    parser.add_argument("--timeout", type=int, default=270, help="seconds per run (two runs stay under 10 minutes)")
    # inside accelerate launch
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--size", choices=sorted(SIZES), help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--output-dir", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    if args.child:
        result = train_once(args)
        Path(args.result).write_text(json.dumps(result))
        return 0

    missing = preflight(args)
    if missing:
        print("\n".join(missing))
        return 2
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print("torch sees no CUDA device: run on the GPU machine, or pass --device cpu (dry mode).")
            return 2
    arch = args.arch or ("qwen3.5-2b" if args.device == "cuda" else "qwen3.5-test")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="rlce-gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for size in [s.strip() for s in args.runs.split(",") if s.strip()]:
        if size not in SIZES:
            parser.error(f"--runs: {size!r} is not one of {', '.join(SIZES)}")
        built = build_model(size, arch, work / f"{size}-model", args.device)
        print(f"built {size}: {built['arch']}, {built['params'] / 1e6:.1f} M parameters ({built['dtype']}) in "
              f"{built['build_seconds']:.1f} s", flush=True)
        result = launch(args, size, built["path"], work, args.timeout)
        results.append(judge({**built, **result}, run_size(size, args.device)["steps"], not args.no_deepspeed)
                       if "step_seconds" in result else {**built, **result})
    print()
    if args.no_deepspeed:
        print("DeepSpeed off (--no-deepspeed): these runs did NOT exercise ZeRO-3.")
    for result in results:
        print(report_line(result))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0 if results and all(r.get("ok") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
