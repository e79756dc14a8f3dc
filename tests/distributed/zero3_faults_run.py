"""Launched by test_zero3_verifier_faults.py under `accelerate launch --config_file configs/accelerate/zero3.yaml
--num_processes 2` (DeepSpeed ZeRO-3, gloo, CPU): RLCE training whose verifier is a real vLLM server reached through
the test's fault-injecting proxy (`tests/fault_proxy.py`). Each rank writes what it saw to `OUT_DIR/rank{r}.json`
(`.resumed.json` with RESUME_FROM).

    zero3_faults_run.py POLICY_DIR OUT_DIR VERIFIER_URL MAX_STEPS [RESUME_FROM]
"""

import json
import os
import sys

from datasets import Dataset
from launching import leave
from testing_utils import preference_rows
from transformers import TrainerCallback

from rlce_trl import RLCEGRPOConfig, RLCEGRPOTrainer


class StepProbe(TrainerCallback):
    """The step each rank starts at and every step it finishes (equal on every rank, or ZeRO-3 would hang)."""

    began_at: int | None = None
    finished: list[int] = []

    def on_train_begin(self, args, state, control, **kwargs):
        StepProbe.began_at = state.global_step

    def on_step_end(self, args, state, control, **kwargs):
        StepProbe.finished.append(state.global_step)


def main(policy_dir: str, out_dir: str, url: str, max_steps: int, resume: str | None = None) -> None:
    rank = int(os.environ["RANK"])
    args = RLCEGRPOConfig(
        output_dir=out_dir, per_device_train_batch_size=8, num_generations=4, max_completion_length=4,
        max_steps=max_steps, learning_rate=1e-4, report_to="none", bf16=False, use_cpu=False, ddp_backend="gloo",
        gradient_checkpointing=False, save_strategy="steps", save_steps=5, seed=0, logging_steps=1,
        rlce_construction_max_tokens=8, rlce_validation_max_tokens=4, rlce_equivalence_max_tokens=8,
        rlce_tie_break_tests_per_direction=0,
        # the verifier: short read timeout and deadline (the proxy holds ~10 % of calls past them), few retries, and
        # the DEFAULT failure budget (5 calls and verifier_max_outage 300 s), which covers the server's restart
        verifier_mode="server", verifier_server_base_url=url, verifier_timeout=2.0, verifier_request_deadline=8.0,
        verifier_max_retries=3,
    )
    rows = preference_rows(16)  # closed labels: no equivalence stage; a small learning rate keeps answers apart
    trainer = RLCEGRPOTrainer(model=policy_dir, args=args, train_dataset=Dataset.from_list(rows),
                              callbacks=[StepProbe()])
    trainer.train(resume_from_checkpoint=resume)
    record = {"rank": rank, "steps": trainer.state.global_step, "began_at": StepProbe.began_at,
              "finished": StepProbe.finished, "log_history": trainer.state.log_history,
              "server_stats": {k: float(v) for k, v in trainer.verifier.transport_metrics().items()}}
    name = f"rank{rank}.resumed.json" if resume else f"rank{rank}.json"
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(record, f)
    leave(trainer)  # past gloo's teardown (launching.leave)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else None)
