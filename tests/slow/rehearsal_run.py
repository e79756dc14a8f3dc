"""One rank of a production-topology rehearsal (tests/slow/test_rehearsal.py). Runs what the paper's launch runs and
writes what this rank saw to `<output_dir>/rehearsal_rank<R>.json`: its verifier server (pid, command line, the
requests it answered by its own `/metrics`), the groups it scored per step, what each verifier request carried (stage,
frames, text), and the logged step and verifier times.

    accelerate launch --config_file configs/accelerate/zero3.yaml --num_processes 2 \\
        tests/slow/rehearsal_run.py train_prefeval --config configs/prefeval_rlce.yaml [overrides]

runs `examples/train_prefeval.py`'s `main` exactly as `accelerate launch examples/train_prefeval.py ...` would, and

    accelerate launch ... tests/slow/rehearsal_run.py -m rlce_trl.coevolution.phase --job <step>/job.json

runs one co-evolution phase exactly as the driver's `coevolve_launcher` runs it (the driver appends
`-m rlce_trl.coevolution.phase --job ...` to the launcher, which ends with this file).
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
SEEN: dict = {}  # the trainer, once it trains
REQUESTS: list[dict] = []  # stage, frames and text of every request this rank's verifier client sent


def record_scoring() -> None:
    """Note every group this rank scores (whatever the reward method) with the step it is scored for, and keep the
    trainer that trains."""
    from rlce_trl import RLCEGRPOTrainer

    score, train = RLCEGRPOTrainer._score_own_groups, RLCEGRPOTrainer.train

    def score_own_groups(self, groups):
        report = score(self, groups)
        for g, _ in report.results:  # the groups this rank's scorer returned results for
            key = hashlib.sha1(json.dumps([groups[g].context, list(groups[g].completions)]).encode()).hexdigest()
            SCORED.append([self.state.global_step, key])
        return report

    def training(self, *args, **kwargs):
        SEEN["trainer"] = self
        return train(self, *args, **kwargs)

    RLCEGRPOTrainer._score_own_groups, RLCEGRPOTrainer.train = score_own_groups, training


def record_requests() -> None:
    """Note, for every request body this rank's verifier client builds, its stage, the frames it carries (`image_url`
    parts) and its text (the rehearsal of a video recipe checks that each request carried its clip)."""
    from rlce_trl.verifiers.server import ServerVerifier

    payload = ServerVerifier._payload

    def recorded(self, request, structured):
        body = payload(self, request, structured)
        parts = [part for message in body["messages"] for part in (
            message["content"] if isinstance(message["content"], list) else [{"type": "text",
                                                                              "text": message["content"]}])]
        REQUESTS.append({"stage": request.stage, "frames": sum(p["type"] == "image_url" for p in parts),
                         "text": " ".join(p["text"] for p in parts if p["type"] == "text")})
        return body

    ServerVerifier._payload = recorded


def served_requests(base_url: str) -> float:
    """Requests the vLLM server says it finished (`vllm:request_success_total` of its Prometheus `/metrics`)."""
    import httpx

    text = httpx.get(f"{base_url}/metrics", timeout=30, trust_env=False).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:request_success_total"))


def run(argv: list[str]) -> None:
    if argv[:2] == ["-m", "rlce_trl.coevolution.phase"]:
        from rlce_trl.coevolution import phase

        phase.main(argv[2:])
        return
    spec = importlib.util.spec_from_file_location(f"example_{argv[0]}", ROOT / "examples" / f"{argv[0]}.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.main(*script.make_parser().parse_args_and_config(argv[1:]))


def main() -> None:
    record_scoring()
    record_requests()
    run(sys.argv[1:])
    trainer = SEEN["trainer"]
    process = trainer.verifier.process  # verifier_mode colocate: this rank's own server
    facts = {
        "rank": trainer.accelerator.process_index,
        "num_processes": trainer.accelerator.num_processes,
        "zero_stage": trainer.accelerator.state.deepspeed_plugin.zero_stage,
        "reward_method": trainer.args.reward_method,
        "server_pid": process.pid,
        "server_alive_after_training": process.is_alive(),
        "server_command": process.command(),
        "server_log": str(process.log_path),
        "served_requests": served_requests(process.base_url),
        "client_requests": trainer.verifier.server_stats.http_requests,
        "verifier_requests": REQUESTS,
        "scored": SCORED,
        "generation_batch_size": trainer.args.generation_batch_size,
        "num_generations": trainer.args.num_generations,
        "steps": trainer.state.global_step,
        "log_history": trainer.state.log_history,
    }
    out = Path(trainer.args.output_dir) / f"rehearsal_rank{facts['rank']}.json"
    out.write_text(json.dumps(facts, default=str))
    # The server is left to the trainer's own exit path (atexit / parent-death signal): the test checks that nothing
    # of it outlives this process.


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
