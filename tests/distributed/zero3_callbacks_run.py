"""Launched by test_zero3_callbacks.py under `accelerate launch --config_file configs/accelerate/zero3.yaml
--num_processes 2` (DeepSpeed ZeRO-3, gloo, CPU): RLCE training with the two callbacks that generate with the policy,
the test-time adaptation per-pass evaluation (with the base model evaluated at `on_train_begin`) and best-checkpoint
validation every step. The policy is sharded, so each of their `generate` calls is a collective.

    zero3_callbacks_run.py MODEL_DIR OUT_DIR
"""

import json
import os
import sys

from datasets import Dataset
from launching import leave
from testing_utils import preference_rows
from transformers import TrainerCallback

from rlce_trl import RLCEGRPOConfig, RLCEGRPOTrainer
from rlce_trl.data.hba import URFUNNY_LABELS
from rlce_trl.evaluation.callbacks import BestCheckpointCallback, make_validation_fn
from rlce_trl.training.tta import PassEvaluationCallback


class ShardingProbe(TrainerCallback):
    """Whether ZeRO-3 manages the policy's parameters when the callbacks run (each forward then fetches them: a
    collective)."""

    managed: list[bool] = []

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.managed.append(all(hasattr(p, "ds_id") for p in model.parameters()))


def main(model_dir: str, out_dir: str) -> None:
    rank = int(os.environ["RANK"])
    args = RLCEGRPOConfig(
        output_dir=out_dir, per_device_train_batch_size=2, num_generations=2, max_completion_length=4,
        num_train_epochs=1, learning_rate=0.1, report_to="none", bf16=False, use_cpu=False, ddp_backend="gloo",
        gradient_checkpointing=False, save_strategy="steps", save_steps=1, seed=0, logging_steps=1,
        rlce_construction_max_tokens=8, rlce_validation_max_tokens=4, rlce_equivalence_max_tokens=8,
    )
    # closed-answer evaluation rows (no judge needed); rank 1 never generates them itself
    rows = [{"id": f"v{i}", "task": "urfunny", "answer_options": list(URFUNNY_LABELS), "gold": "humour",
             "prompt": [{"role": "user", "content": f"the user said {w}"}]}
            for i, w in enumerate(["yes", "no", "food"])]
    best = BestCheckpointCallback(make_validation_fn(rows, os.path.join(out_dir, "validation"), max_new_tokens=3,
                                                     batch_size=2), eval_steps=1)
    tta = PassEvaluationCallback(rows, os.path.join(out_dir, "tta"), eval_base=True, max_new_tokens=3, batch_size=2)
    trainer = RLCEGRPOTrainer(model=model_dir, args=args, train_dataset=Dataset.from_list(preference_rows(4)),
                              callbacks=[ShardingProbe(), best, tta])
    trainer.train()
    record = {"rank": rank, "steps": trainer.state.global_step, "history": best.history, "passes": tta.passes,
              "policy_zero3": ShardingProbe.managed}
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(record, f)
    leave(trainer)  # past gloo's teardown (launching.leave)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
