# Copyright the rlce-trl developers. Licensed under the Apache License, Version 2.0.
"""
Elect rewards recipe on the offline numbered-evidence task (Elect paper §4.1 / §5.1 hyper-parameters where they fit
a CPU): GRPO with the five Elect rewards, either paper-faithful with gold answers on a stock `trl.GRPOTrainer`
(`--gate gold`), or label-free on `RLCEGRPOTrainer`, where "correct" is RLCE's verified answer (`--gate rlce`).

    python -m rlce_trl.scripts.train_elect --gate gold --output_dir runs/elect_gold        # SmolLM2-135M, CPU
    python -m rlce_trl.scripts.train_elect --gate rlce --output_dir runs/elect_rlce --max_steps 20
    rlce-trl train --config elect_numbered_evidence --output_dir runs/elect_gold           # the shipped recipe

`--config recipe.yaml` reads the flags from a YAML mapping (keys are the flag names; flags on the command line win),
which is how `rlce-trl train` runs a recipe that names `script: elect`. Paper settings (GPU): `--num_generations 4
--beta 0.04 --learning_rate 1e-5 --lora` (r=8, alpha=16, dropout 0.05), weight decay 0.1, grad clip 1.0, 2 epochs,
`--think_range 64,1024`. The default think range here is (16, 128) tokens, because a 135M model on 8-sentence rows
thinks briefly (below the lower bound the transparency term is 0).
"""

from __future__ import annotations

import argparse

from rlce_trl.errors import InputError
from rlce_trl.scripts.utils import did_you_mean, exit_on_bad_input, read_recipe


class _Parser(argparse.ArgumentParser):
    """Errors are one line that names the fix ([`InputError`]), not the usage."""

    def error(self, message):
        raise InputError(f"{message} (`--help` lists the flags).")


def make_parser() -> argparse.ArgumentParser:
    parser = _Parser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--config", help="A YAML recipe: flag names to values (command-line flags win).")
    parser.add_argument("--script", choices=("elect",), default="elect",
                        help="The recipe's training script, read by `rlce-trl train` (this script: elect).")
    parser.add_argument("--model_name_or_path", default="smollm2", help="`smollm2` = the packaged SmolLM2-135M")
    parser.add_argument("--gate", choices=("gold", "rlce", "none"), default="gold")
    parser.add_argument("--output_dir", help="Required (on the command line or in the recipe).")
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--max_steps", type=int, default=10)
    parser.add_argument("--num_generations", type=int, default=4)
    parser.add_argument("--per_device_train_batch_size", type=int, default=4)
    parser.add_argument("--max_completion_length", type=int, default=160)
    parser.add_argument("--learning_rate", type=float, default=1e-5)
    parser.add_argument("--beta", type=float, default=0.0)
    parser.add_argument("--think_range", default="16,128")
    parser.add_argument("--lora", action="store_true", help="LoRA r=8, alpha=16, dropout 0.05 (paper §5.1)")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def parse_args(argv=None):
    """The flags, with a `--config` recipe's values as defaults. Unknown recipe keys and a missing `--output_dir` are
    one-line errors that name the fix."""
    parser = make_parser()
    config = parser.parse_known_args(argv)[0].config
    if config:
        recipe = read_recipe(config) or {}
        known = {a.dest for a in parser._actions} - {"help", "config"}
        unknown = sorted(set(recipe) - known)
        if unknown:
            hint = did_you_mean(unknown[0], known)
            more = f" ({len(unknown) - 1} more unknown)" if len(unknown) > 1 else ""
            fix = hint or ": use the flag names of --help."
            raise InputError(f"unknown key {unknown[0]!r} in {config}{fix}{more}")
        actions = {a.dest: a for a in parser._actions}
        for key, value in recipe.items():  # argparse converts only string defaults: check YAML-typed values here
            action = actions[key]
            if action.type in (int, float) and (isinstance(value, (bool, list, dict)) or not _converts(action.type,
                                                                                                     value)):
                raise InputError(f"{key}: {value!r} in {config} is not a valid {action.type.__name__}.")
        parser.set_defaults(**recipe)
    args = parser.parse_args(argv)
    if not args.output_dir:
        parser.error("pass --output_dir (or set output_dir in the recipe).")
    return args


def _converts(kind, value) -> bool:
    try:
        kind(str(value))
    except ValueError:
        return False
    return True


def main(argv=None):
    args = parse_args(argv)
    from datasets import Dataset
    from transformers import AutoTokenizer

    from rlce_trl.data.synthetic import numbered_evidence
    from rlce_trl.elect import ElectRewardConfig, make_elect_reward_funcs
    from rlce_trl.models import resolve_model

    model = resolve_model(args.model_name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(model)
    lo, hi = (int(x) for x in args.think_range.split(","))
    rows = numbered_evidence(args.rows, seed=args.seed, split="train", supervised=args.gate == "gold")
    cfg = ElectRewardConfig(tokenizer=tokenizer, think_range=(lo, hi), gate=args.gate)
    common = {
        "output_dir": args.output_dir, "num_generations": args.num_generations,
        "per_device_train_batch_size": args.per_device_train_batch_size, "max_steps": args.max_steps,
        "max_completion_length": args.max_completion_length, "learning_rate": args.learning_rate,
        "beta": args.beta, "epsilon": 0.2, "weight_decay": 0.1, "max_grad_norm": 1.0, "logging_steps": 1,
        "report_to": "none", "bf16": False, "use_cpu": True, "gradient_checkpointing": False, "save_strategy": "no",
        "seed": args.seed,
    }
    peft_config = None
    if args.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.05, task_type="CAUSAL_LM")
    if args.gate == "rlce":
        from rlce_trl.config import RLCEGRPOConfig
        from rlce_trl.trainer import RLCEGRPOTrainer

        funcs, weights = make_elect_reward_funcs(cfg, include_accuracy=False)
        trainer = RLCEGRPOTrainer(
            model=model, reward_funcs=funcs, train_dataset=Dataset.from_list(rows), peft_config=peft_config,
            args=RLCEGRPOConfig(**common, reward_weights=weights, rlce_verified_weight=0.1, rlce_format_weight=0.0))
    else:
        from trl import GRPOConfig, GRPOTrainer

        funcs, weights = make_elect_reward_funcs(cfg)
        trainer = GRPOTrainer(model=model, reward_funcs=funcs, train_dataset=Dataset.from_list(rows),
                              peft_config=peft_config, args=GRPOConfig(**common, reward_weights=weights))
    trainer.train()
    return trainer


def main_cli(argv=None) -> None:
    """The script's `__main__`: bad flags or recipe are one `error:` line and exit status 2."""
    exit_on_bad_input(lambda: main(argv))


if __name__ == "__main__":
    main_cli()
