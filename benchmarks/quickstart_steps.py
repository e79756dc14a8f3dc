"""Quickstart step time and the verifier's share of it, with the previous transformers backend and the new one.

    python -m benchmarks.quickstart_steps                  # configs/quickstart.yaml, 4 steps per backend
    python -m benchmarks.quickstart_steps --steps 2 --backends new

Each backend trains the quickstart (`examples/train_prefeval.py --config configs/quickstart.yaml`, SmolLM2-135M, G=4,
same seed) in its own process, one after the other; "previous" replaces the trainer's `TransformersVerifier` with
the class of commit `--previous` (loaded from `git show`). Printed per backend: TRL's `step_time` of each step,
`rlce/verifier_seconds`, and the verifier's share of the step. The first step includes warm-up; the means leave it
out when there are at least two steps.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def child(backend: str, steps: int, previous: str) -> dict:
    import rlce_trl.trainer
    import rlce_trl.verifiers.transformers_backend
    from rlce_trl.scripts import train_prefeval  # what examples/train_prefeval.py runs

    if backend == "previous":
        from benchmarks.verifier_speed import load_previous_backend

        old = load_previous_backend(previous).TransformersVerifier
        # the trainer's own-model branches, and `frozen_verifier` (the quickstart's frozen copy of its checkpoint)
        rlce_trl.trainer.TransformersVerifier = rlce_trl.verifiers.transformers_backend.TransformersVerifier = old
    out = tempfile.mkdtemp(prefix=f"quickstart-{backend}-")
    argv = ["--config", str(REPO / "configs" / "quickstart.yaml"), "--max_steps", str(steps), "--output_dir", out,
            "--save_strategy", "no", "--log_completions", "false"]
    script_args, training_args, model_args = train_prefeval.make_parser().parse_args_and_config(argv)
    trainer = train_prefeval.main(script_args, training_args, model_args)
    logs = [e for e in trainer.state.log_history if "step_time" in e]
    return {"backend": backend, "step_time": [e["step_time"] for e in logs],
            "verifier_seconds": [e.get("rlce/verifier_seconds", 0.0) for e in logs]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--backends", nargs="+", default=["previous", "new"], choices=["previous", "new"])
    parser.add_argument("--previous", default="2a594f1")
    parser.add_argument("--child", choices=["previous", "new"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.steps, args.previous)), flush=True)
        return 0
    command = "python -m benchmarks.quickstart_steps " + " ".join(sys.argv[1:])
    results = []
    for backend in args.backends:
        proc = subprocess.run([sys.executable, "-m", "benchmarks.quickstart_steps", "--child", backend, "--steps",
                               str(args.steps), "--previous", args.previous], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, check=False)
        found = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if not found:
            print("\n".join(proc.stdout.splitlines()[-40:]))
            return 1
        results.append(found[0])
    print(f"\n$ {command}")
    for r in results:
        skip = 1 if len(r["step_time"]) > 1 else 0
        steps, verifier = r["step_time"][skip:], r["verifier_seconds"][skip:]
        mean_step, mean_verifier = sum(steps) / len(steps), sum(verifier) / len(verifier)
        print(f"{r['backend']:<9} steps {', '.join(f'{s:.1f}' for s in r['step_time'])} s; verifier "
              f"{', '.join(f'{s:.1f}' for s in r['verifier_seconds'])} s; mean after warm-up: step {mean_step:.1f} s, "
              f"verifier {mean_verifier:.1f} s ({mean_verifier / mean_step:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
