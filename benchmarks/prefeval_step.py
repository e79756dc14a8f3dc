"""One step of the PrefEval recipe at CPU scale, phase by phase: where the step's seconds go and the verifier's share.

    python -m benchmarks.prefeval_step --prefeval_dir /path/to/PrefEval            # this checkout, one step
    python -m benchmarks.prefeval_step --prefeval_dir DIR --trees . ../other-checkout --rounds 2

The step is the one of the command the README's performance page times (`configs/prefeval_rlce.yaml`, SmolLM2-135M-
Instruct as policy, reference and verifier, fp32 on the CPU, G = 4, one prompt, 48 new tokens, transformers
verifier; `--model` and `--max_tokens` change the model and both token limits). Each tree (a checkout; `.` is this
one) runs in its own process with `PYTHONPATH=<tree>/src`, its own recipe and its own code: give two trees to compare
two versions of the package on the same machine, alternately (`--rounds`), since absolute seconds depend on what
else the machine runs. The phases are timed by wrapping the trainer's own methods, nothing else changes:

- policy generation: TRL's `_generate_single_turn` (the policy's rollouts)
- log-probs, no grad: `_get_per_token_logps_and_entropies` outside autograd (the reference model's pass, and the
  old policy's where TRL needs one); log-probs, loss: the same inside the loss (the forward of the gradient step)
- backward, optimizer step: `Accelerator.backward`, the accelerated optimizer's `step`
- verifier, per stage (equivalence, construction, validation, extra round = the tie-break round's construction and
  validation): seconds, calls, requests and generated tokens of `Verifier.generate`
- rewards, other: the rest of the reward computation (parsing, aggregation, the evidence log)

Printed per tree: each phase's seconds (median over the rounds), the step's wall time (from its rollout to the end of
its optimizer step), the verifier's share of it, and what was validated (tests, verdicts, statuses).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: The recipe overrides of the command on the performance page (CPU scale, one step).
def step_args(prefeval_dir: str, model: str, max_tokens: int, steps: int, output_dir: str) -> list[str]:
    return [
        "--config", "configs/prefeval_rlce.yaml", "--prefeval_dir", prefeval_dir, "--model_name_or_path", model,
        "--dtype", "float32", "--bf16", "false", "--use_cpu", "true", "--use_vllm", "false",
        "--verifier_mode", "transformers", "--activation_checkpointing", "false", "--max_steps", str(steps),
        "--generation_batch_size", "4", "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1",
        "--max_completion_length", str(max_tokens), "--max_prompt_length", "2048",
        "--rlce_construction_max_tokens", str(max_tokens), "--save_strategy", "no", "--output_dir", output_dir,
        "--log_completions", "false", "--report_to", "none",
    ]


PHASES = ("policy generation", "log-probs, no grad", "log-probs, loss", "backward", "optimizer step",
          "verifier: equivalence", "verifier: construction", "verifier: validation", "verifier: extra round",
          "rewards, other")


class Timers:
    """Wall and CPU seconds per phase (inclusive), and the tokens the models read while each phase is innermost."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.stack: list[str] = []

    @contextlib.contextmanager
    def phase(self, name: str):
        self.stack.append(name)
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - wall
            self.cpu[name] += time.process_time() - cpu
            self.stack.pop()

    def wrap(self, owner, name: str, phase):
        """Time `owner.name` under `phase` (a name, or a function of the call's arguments giving one)."""
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            with self.phase(phase(*args, **kwargs) if callable(phase) else phase):
                return original(*args, **kwargs)

        setattr(owner, name, timed)
        return original

    def count_forward(self, module, args, kwargs):
        """After each forward: the tokens each base model (not each layer) reads, under the innermost phase."""
        from transformers import PreTrainedModel

        if not isinstance(module, PreTrainedModel) or module.base_model is not module:
            return
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            ids = kwargs.get("inputs_embeds")
        phase = self.stack[-1] if self.stack else "other"
        self.counts[phase]["forwards"] += 1
        self.counts[phase]["tokens read"] += int(ids.shape[0] * ids.shape[1]) if ids is not None else 0


def child(args) -> dict:
    import torch
    from accelerate import Accelerator
    from accelerate.optimizer import AcceleratedOptimizer
    from trl import GRPOTrainer

    from rlce_trl.evidence.pipeline import EvidencePipeline
    from rlce_trl.scripts import train_prefeval
    from rlce_trl.trainer import RLCEGRPOTrainer
    from rlce_trl.verifiers.base import Verifier

    timers = Timers()
    timers.wrap(GRPOTrainer, "_generate_single_turn", "policy generation")
    timers.wrap(GRPOTrainer, "_get_per_token_logps_and_entropies",
                lambda *a, **k: "log-probs, loss" if torch.is_grad_enabled() else "log-probs, no grad")
    timers.wrap(Accelerator, "backward", "backward")
    timers.wrap(RLCEGRPOTrainer, "_calculate_rewards", "rewards")  # the group scoring, then TRL's own
    timers.wrap(EvidencePipeline, "_extra_round", "extra round")  # only to name the verifier calls made inside
    torch.nn.modules.module.register_module_forward_hook(
        lambda module, inputs, kwargs, output: timers.count_forward(module, inputs, kwargs), with_kwargs=True)
    marks: dict[str, list[float]] = {"start": [], "end": []}
    optimizer_step = AcceleratedOptimizer.step

    def step(self, *a, **k):
        with timers.phase("optimizer step"):
            result = optimizer_step(self, *a, **k)
        marks["end"].append(time.perf_counter())
        return result

    AcceleratedOptimizer.step = step
    rollout = GRPOTrainer._generate_and_score_completions

    def rollout_start(self, *a, **k):
        marks["start"].append(time.perf_counter())
        return rollout(self, *a, **k)

    GRPOTrainer._generate_and_score_completions = rollout_start
    verifier_generate = Verifier.generate

    def counted_generate(self, requests):
        stage = ",".join(sorted({r.stage for r in requests})) or "other"
        if "extra round" in timers.stack:
            stage = "extra round"
        with timers.phase(f"verifier: {stage}"):
            replies = verifier_generate(self, requests)
        count = timers.counts[f"verifier: {stage}"]
        count["calls"] += 1
        count["requests"] += len(requests)
        count["samples"] += sum(r.sampling.n for r in requests)
        count["generated tokens"] += sum(r.num_tokens for r in replies)
        return replies

    Verifier.generate = counted_generate

    out = tempfile.mkdtemp(prefix="prefeval-step-")
    argv = step_args(args.prefeval_dir, args.model, args.max_tokens, args.steps, out)
    started = time.perf_counter()
    script_args, training_args, model_args = train_prefeval.make_parser().parse_args_and_config(argv)
    trainer = train_prefeval.main(script_args, training_args, model_args)
    total = time.perf_counter() - started
    shutil.rmtree(out, ignore_errors=True)
    seconds, cpu = dict(timers.seconds), dict(timers.cpu)
    for table in (seconds, cpu):
        table.pop("extra round", None)
        verifier = sum(v for k, v in table.items() if k.startswith("verifier: "))
        table["verifier"] = verifier
        table["rewards, other"] = table.pop("rewards", 0.0) - verifier
    steps = len(marks["end"])
    step_seconds = (marks["end"][-1] - marks["start"][0]) / steps if steps and marks["start"] else float("nan")
    logs = [e for e in trainer.state.log_history if "step_time" in e]
    metrics = {k: v for e in logs for k, v in e.items()
               if k.startswith("rlce/") and any(w in k for w in ("tests", "verified", "tie"))}
    return {"seconds": seconds, "cpu": cpu, "counts": {k: dict(v) for k, v in timers.counts.items()},
            "step": step_seconds, "trl_step_time": [e["step_time"] for e in logs], "total": total,
            "metrics": metrics, "torch_threads": torch.get_num_threads()}


def run_tree(tree: Path, args) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree / "src"), str(tree)]), HF_HUB_OFFLINE="1",
               HF_HUB_DISABLE_TELEMETRY="1")
    # run as a file, not `-m benchmarks...`: from the other tree's folder its own `benchmarks` package would win
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--prefeval_dir", args.prefeval_dir,
               "--model", args.model, "--max_tokens", str(args.max_tokens), "--steps", str(args.steps)]
    # cwd = the tree: its recipe (configs/prefeval_rlce.yaml) and its package
    proc = subprocess.run(command, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          check=False)
    found = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if not found:
        print("\n".join(proc.stdout.splitlines()[-40:]))
        raise SystemExit(f"{tree}: the step failed (exit {proc.returncode})")
    return found[0]


def report(name: str, runs: list[dict]) -> None:
    def med(key, phase=None):
        values = [r[key] if phase is None else r[key].get(phase, 0.0) for r in runs]
        return statistics.median(values) if values else 0.0

    step = med("step")
    print(f"\n{name}: {len(runs)} run(s), torch threads {runs[0]['torch_threads']}; median seconds")
    print(f"  {'phase':<24}{'wall s':>8}{'share':>7}{'cpu s':>8}  work (first run)")
    for phase in PHASES:
        wall = med("seconds", phase)
        work = ", ".join(f"{k} {v}" for k, v in runs[0]["counts"].get(phase, {}).items())
        print(f"  {phase:<24}{wall:>8.1f}{wall / step:>7.0%}{med('cpu', phase):>8.1f}  {work}")
    verifier = med("seconds", "verifier")
    print(f"  {'step, rollout to update':<24}{step:>8.1f}")
    print(f"  {'verifier share':<24}{verifier:>8.1f}{verifier / step:>7.0%}{med('cpu', 'verifier'):>8.1f}")
    print(f"  {'whole command':<24}{med('total'):>8.1f}          (loading, data, the step, the report)")
    metrics = runs[0]["metrics"]
    if metrics:
        print("  " + ", ".join(f"{k.split('/', 1)[1]} {v:g}" for k, v in sorted(metrics.items())))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prefeval_dir", default=os.environ.get("PREFEVAL_DIR"),
                        help="A PrefEval checkout (default: $PREFEVAL_DIR).")
    parser.add_argument("--trees", nargs="+", default=["."], help="Checkouts to time (default: this one).")
    parser.add_argument("--rounds", type=int, default=1, help="Runs per tree, alternating between the trees.")
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--max_tokens", type=int, default=48, help="Policy and construction token limit.")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.prefeval_dir:
        parser.error("no PrefEval checkout: pass --prefeval_dir DIR or set PREFEVAL_DIR")
    if args.child:
        print("RESULT " + json.dumps(child(args)), flush=True)
        return 0
    trees = [Path(t).resolve() for t in args.trees]
    runs: dict[Path, list[dict]] = {t: [] for t in trees}
    for _ in range(args.rounds):
        for tree in trees:
            runs[tree].append(run_tree(tree, args))
            print(f"{tree}: " + json.dumps(runs[tree][-1]), flush=True)  # kept if a later run fails
    print("\n$ python -m benchmarks.prefeval_step " + " ".join(sys.argv[1:]))
    for tree in trees:
        report(str(tree), runs[tree])
    return 0


if __name__ == "__main__":
    sys.exit(main())
