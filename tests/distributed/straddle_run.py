"""Launched by test_straddle.py with `python -m torch.distributed.run --nproc_per_node 2` (gloo, CPU).

3 prompts x G=4 completions over 2 processes with 6 completions each: group 1 straddles the ranks. Each rank writes
what it held locally, which groups it scored (with how many members) and the rewards it received.
"""

import json
import os
import sys

from datasets import Dataset
from launching import leave
from testing_utils import preference_rows  # tests/ is on PYTHONPATH (test_straddle.py sets it)

from rlce_trl import RLCEGRPOConfig, RLCEGRPOTrainer


def main(model_dir: str, out_dir: str) -> None:
    rank = int(os.environ["RANK"])
    args = RLCEGRPOConfig(
        output_dir=out_dir, per_device_train_batch_size=3, steps_per_generation=2, num_generations=4,
        max_completion_length=8, max_steps=1, learning_rate=0.1, report_to="none", bf16=False, use_cpu=True,
        gradient_checkpointing=False, save_strategy="no", seed=0, rlce_construction_max_tokens=48,
        rlce_validation_max_tokens=4, rlce_equivalence_max_tokens=8, logging_steps=1,
    )
    rows = [dict(row, prompt=[{"role": "user", "content": f"the user said food {w}"}])
            for row, w in zip(preference_rows(3), ["yes", "no", "likes"], strict=True)]
    trainer = RLCEGRPOTrainer(model=model_dir, args=args, train_dataset=Dataset.from_list(rows))
    record = {"rank": rank, "local_prompts": [], "scored": [], "rewards": []}

    score = trainer.group_scorer.score

    def recording_score(groups):
        record["scored"].extend({"context": g.context, "size": len(g.completions)} for g in groups)
        return score(groups)

    trainer.group_scorer.score = recording_score
    calculate = trainer._calculate_rewards

    def recording_calculate(inputs, prompts, completions, completion_ids_list):
        record["local_prompts"].extend(p[-1]["content"] for p in prompts)
        rewards = calculate(inputs, prompts, completions, completion_ids_list)
        record["rewards"].extend(rewards[:, 0].nan_to_num(-1).tolist())  # gathered: every rank sees all rows
        return rewards

    trainer._calculate_rewards = recording_calculate
    trainer.train()
    record["logged"] = [e for e in trainer.state.log_history if "rlce/unscored_fraction" in e]
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(record, f)
    leave(trainer)  # past gloo's teardown (launching.leave)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
