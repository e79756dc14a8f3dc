"""Launched by test_zero3_verifier_faults.py under `accelerate launch --config_file configs/accelerate/zero3.yaml
--num_processes 2` (DeepSpeed ZeRO-3, gloo, CPU): RLCE training with `verifier_mode="colocate"`, each rank's verifier
server started by the trainer (`verifiers/vllm_process.py`; here the FAKE vLLM server of `tests/fakes.py`, which the
test kills). Each rank writes `OUT_DIR/rank{r}.json`: its steps and the one line it ended with.

    zero3_colocate_death_run.py POLICY_DIR OUT_DIR
"""

import json
import os
import sys

from datasets import Dataset
from testing_utils import preference_rows

from rlce_trl import RLCEGRPOConfig, RLCEGRPOTrainer
from rlce_trl.verifiers import VerifierUnavailableError


def main(policy_dir: str, out_dir: str) -> None:
    rank = int(os.environ["RANK"])
    args = RLCEGRPOConfig(
        output_dir=out_dir, per_device_train_batch_size=8, num_generations=4, max_completion_length=4,
        max_steps=200, learning_rate=1e-4, report_to="none", bf16=False, use_cpu=False, ddp_backend="gloo",
        gradient_checkpointing=False, save_strategy="steps", save_steps=100, seed=0, logging_steps=1,
        rlce_construction_max_tokens=8, rlce_validation_max_tokens=4, rlce_equivalence_max_tokens=8,
        rlce_tie_break_tests_per_direction=0, verifier_mode="colocate",
        verifier_vllm_python=os.environ["RLCE_TEST_VLLM_PYTHON"],
        verifier_timeout=5.0, verifier_request_deadline=15.0, verifier_max_retries=1, verifier_startup_timeout=60,
    )
    trainer = RLCEGRPOTrainer(model=policy_dir, args=args, train_dataset=Dataset.from_list(preference_rows(16)))
    line = None
    try:
        trainer.train()
    except VerifierUnavailableError as error:
        line = f"error: {error}"  # the whole message: the test holds it to one line
        print(line, file=sys.stderr)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "steps": trainer.state.global_step, "line": line}, f)
    sys.exit(1 if line else 0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
