"""Launched by test_zero3_video.py under `accelerate launch --config_file configs/accelerate/zero3.yaml
--num_processes 2` (DeepSpeed ZeRO-3, gloo, CPU): the IntentQA video recipe (`examples/train_hba.py`) on the tiny
random Qwen3.5 VLM, the verifier on the transformers backend (a frozen, unsharded vision-language copy on every rank).
Prompts keep frame references, gathered across the ranks with the completions; each group is scored by one rank, which
resolves the clips of rows that another rank generated. Each rank records, per group it scored, the number of distinct
answers, and how many `generate` calls its verifier made.

    zero3_video_run.py <train_hba arguments>
"""

import json
import os
import sys

from helpers import load_example
from launching import leave

from rlce_trl import RLCEGRPOTrainer
from rlce_trl.verifiers.vlm_backend import VisionLanguageVerifier

RECORD = {"scored": [], "verifier_generate_calls": 0}


def record() -> None:
    chunk = VisionLanguageVerifier._generate_chunk

    def counted(self, requests):
        RECORD["verifier_generate_calls"] += 1
        return chunk(self, requests)

    VisionLanguageVerifier._generate_chunk = counted
    calculate = RLCEGRPOTrainer._calculate_rewards

    def calculate_recorded(self, *args, **kwargs):
        if not getattr(self.group_scorer, "_recorded", False):
            score = self.group_scorer.score

            def score_recorded(groups):
                RECORD["scored"].extend(
                    {"distinct": len(set(g.completions)), "has_clip_reference": bool(g.media)
                     and all("source" in m for m in g.media)} for g in groups)
                return score(groups)

            self.group_scorer.score, self.group_scorer._recorded = score_recorded, True
        return calculate(self, *args, **kwargs)

    RLCEGRPOTrainer._calculate_rewards = calculate_recorded


if __name__ == "__main__":
    record()
    script = load_example("train_hba")
    script_args, training_args, model_args = script.make_parser().parse_args_and_config(sys.argv[1:])
    trainer = script.main(script_args, training_args, model_args)
    RECORD.update(rank=trainer.accelerator.process_index, steps=trainer.state.global_step,
                  verifier=type(trainer.verifier).__name__,
                  zero_stage=trainer.accelerator.state.deepspeed_plugin.zero_stage,
                  verifier_zero3=any(hasattr(p, "ds_id") for p in trainer.verifier.model.parameters()))
    with open(os.path.join(training_args.output_dir, f"rank{RECORD['rank']}.json"), "w") as f:
        json.dump(RECORD, f)
    leave()  # the script ended the launch (end_run); past gloo's teardown (launching.leave)
