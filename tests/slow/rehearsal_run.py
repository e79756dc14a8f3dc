"""One rank of the production-topology rehearsal (tests/slow/test_rehearsal.py): runs an example training script's
`main` exactly as `accelerate launch examples/<script>.py --config <recipe> ...` would, and writes what this rank saw
to `<output_dir>/rehearsal_rank<R>.json`: its verifier server (pid, command line, the requests it answered by its
own `/metrics`), the groups it scored per step, and the logged step and verifier times.

    accelerate launch --config_file configs/accelerate/zero3.yaml --num_processes 2 \\
        tests/slow/rehearsal_run.py train_prefeval --config configs/prefeval_rlce.yaml [overrides]
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCORED: list[list] = []  # [step, group key] of every group this rank scored
STEP = {"now": None}


def record_scoring() -> None:
    """Note the step of each reward computation and every group the RLCE pipeline scores on this rank."""
    from rlce_trl import RLCEGRPOTrainer
    from rlce_trl.evidence.pipeline import EvidencePipeline

    calculate, score = RLCEGRPOTrainer._calculate_rewards, EvidencePipeline.score

    def calculate_rewards(self, *args, **kwargs):
        STEP["now"] = self.state.global_step
        return calculate(self, *args, **kwargs)

    def scored(self, groups, *args, **kwargs):
        for group in groups:
            key = hashlib.sha1(json.dumps([group.context, list(group.completions)]).encode()).hexdigest()
            SCORED.append([STEP["now"], key])
        return score(self, groups, *args, **kwargs)

    RLCEGRPOTrainer._calculate_rewards, EvidencePipeline.score = calculate_rewards, scored


def served_requests(base_url: str) -> float:
    """Requests the vLLM server says it finished (`vllm:request_success_total` of its Prometheus `/metrics`)."""
    import httpx

    text = httpx.get(f"{base_url}/metrics", timeout=30, trust_env=False).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:request_success_total"))


def main() -> None:
    record_scoring()
    spec = importlib.util.spec_from_file_location(f"example_{sys.argv[1]}", ROOT / "examples" / f"{sys.argv[1]}.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script_args, training_args, model_args = script.make_parser().parse_args_and_config(sys.argv[2:])
    trainer = script.main(script_args, training_args, model_args)
    process = trainer.verifier.process  # verifier_mode colocate: this rank's own server
    facts = {
        "rank": trainer.accelerator.process_index,
        "num_processes": trainer.accelerator.num_processes,
        "zero_stage": trainer.accelerator.state.deepspeed_plugin.zero_stage,
        "server_pid": process.pid,
        "server_alive_after_training": process.is_alive(),
        "server_command": process.command(),
        "server_log": str(process.log_path),
        "served_requests": served_requests(process.base_url),
        "client_requests": trainer.verifier.server_stats.http_requests,
        "scored": SCORED,
        "generation_batch_size": training_args.generation_batch_size,
        "num_generations": training_args.num_generations,
        "steps": trainer.state.global_step,
        "log_history": trainer.state.log_history,
    }
    out = Path(training_args.output_dir) / f"rehearsal_rank{facts['rank']}.json"
    out.write_text(json.dumps(facts, default=str))
    # The server is left to the trainer's own exit path (atexit / parent-death signal): the test checks that nothing
    # of it outlives this process.


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
