"""Runs an example script's `main` (as `python examples/<script>.py` would) and writes what each rank saw to
`<output_dir>/rank<R>.json`, for the multi-process tests.

    <launcher> run_example.py <train_prefeval|train_hba> --config ... [overrides]
"""

import json
import os
import sys

from helpers import load_example

DURING = {}


def record_during_training() -> None:
    """Look at the models while rewards are computed (the policy's parameters are partitioned then)."""
    from rlce_trl import RLCEGRPOTrainer

    original = RLCEGRPOTrainer._calculate_rewards

    def calculate(self, *args, **kwargs):
        if not DURING:
            policy = self.accelerator.unwrap_model(self.model)
            DURING["policy_sharded"] = any(hasattr(p, "ds_shape") and p.numel() == 0 for p in policy.parameters())
            DURING["policy_numel_local"] = sum(p.numel() for p in policy.parameters())
        return original(self, *args, **kwargs)

    RLCEGRPOTrainer._calculate_rewards = calculate


def facts(trainer) -> dict:
    import torch

    policy = trainer.accelerator.unwrap_model(trainer.model)
    verifier_model = getattr(trainer.verifier, "model", None)
    ds_plugin = trainer.accelerator.state.deepspeed_plugin
    return {
        "rank": trainer.accelerator.process_index,
        "num_processes": trainer.accelerator.num_processes,
        "deepspeed": bool(trainer.is_deepspeed_enabled),
        "zero_stage": ds_plugin.zero_stage if ds_plugin is not None else None,
        # ZeRO-3 replaces each local parameter by an empty placeholder and keeps the full shape in `ds_shape`
        **DURING,
        "verifier_is_policy": verifier_model is policy,
        "verifier_sharded": any(hasattr(p, "ds_shape") for p in verifier_model.parameters()),
        "verifier_numel": sum(p.numel() for p in verifier_model.parameters()),
        "verifier_finite": all(torch.isfinite(p).all().item() for p in verifier_model.parameters()),
        "verifier_calls": sum(e.get("rlce/verifier_calls", 0) for e in trainer.state.log_history),
        "steps": trainer.state.global_step,
        "hub_model_id": trainer.hub_model_id,
        "log_history": trainer.state.log_history,
    }


if __name__ == "__main__":
    record_during_training()
    script = load_example(sys.argv[1])
    script_args, training_args, model_args = script.make_parser().parse_args_and_config(sys.argv[2:])
    trainer = script.main(script_args, training_args, model_args)
    with open(os.path.join(training_args.output_dir, f"rank{trainer.accelerator.process_index}.json"), "w") as f:
        json.dump(facts(trainer), f, default=str)
