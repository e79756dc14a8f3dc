"""`rlce-trl train --config <recipe> [overrides]` and `rlce-trl recipes [NAME]`: run a shipped or given recipe with
the training script it names ([`rlce_trl.training.recipes`]), or list and print the recipes."""

from __future__ import annotations

import argparse

from ..errors import InputError
from ..training.recipes import describe, list_recipes, resolve_recipe, train

USAGE = "rlce-trl train --config <recipe> [--<argument> <value> ...]"
DESCRIPTION = (
    "Run a recipe (a YAML path or a name from `rlce-trl recipes`) with its training script; any recipe key can be\n"
    "overridden on the command line as --<key> <value>. Several GPUs:\n"
    "  accelerate launch --config_file <accelerate.yaml> -m rlce_trl.cli train --config <recipe>"
)
#: The flags most runs change, shown by `rlce-trl train --help` (they pass through to the recipe's script).
COMMON_FLAGS = [
    ("--task FILE", "your own task file (YAML): train on its rows with the recipe's method"),
    ("--dataset_name NAME", "the recipe's data instead: `sample`, a PrefEval folder, a .jsonl / .csv file"),
    ("--model_name_or_path M", "the policy: a folder, a Hub id, or an offline model (smollm2-135m-instruct)"),
    ("--max_steps N", "optimizer steps (N >= 1; -1: train num_train_epochs epochs)"),
    ("--output_dir DIR", "where checkpoints, logs, the model card and the run report go"),
    ("--reward_method NAME", "rlce (default), usc, policy_judge, ttrl, rar, rler, ... (docs/baselines.md)"),
    ("--verifier_mode MODE", "the frozen verifier's backend: transformers, server, colocate (vLLM)"),
    ("--verifier_model_name_or_path M", "the verifier's model (default: the policy's initial checkpoint)"),
    ("--learning_rate X", "> 0 (the paper: 1e-6)"),
    ("--num_generations G", "rollouts per prompt (2 or more; the paper: 4)"),
    ("--max_prompt_length N", "drop rows with longer prompts (unset: longer than the model's context)"),
    ("--report_to none|trackio|wandb", "where metrics go"),
]
EPILOG = ("common flags (any recipe key works the same way):\n"
          + "\n".join(f"  {flag:<33} {text}" for flag, text in COMMON_FLAGS)
          + "\n\nevery argument (TRL's GRPOConfig, RLCE's settings, the script's; long):\n"
          "  python -m rlce_trl.scripts.train_prefeval --help\n"
          "example:\n  rlce-trl train --config quickstart --max_steps 2 --output_dir outputs/try")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "train", help="Train with a recipe: rlce-trl train --config <recipe or path> [overrides].", usage=USAGE,
        description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", default=None, help="The recipe: a YAML path or a name from `rlce-trl recipes`.")
    parser.set_defaults(func=main, accepts_extra=True)

    text = "List the shipped training recipes, or print one."
    recipes = subparsers.add_parser("recipes", help=text, description=text)
    recipes.add_argument("name", nargs="?", help="Recipe to print (e.g. prefeval_rlce).")
    recipes.add_argument("--path", action="store_true", help="Print the recipe's file path instead of its content.")
    recipes.set_defaults(func=main_recipes)


def main(args: argparse.Namespace) -> int:
    """`rlce-trl train`: the recipe's script parses `--config` and the overrides (`args.extra`) itself."""
    if args.config is None and not args.extra:
        print(f"usage: {USAGE}\n\n{DESCRIPTION}\n\n{EPILOG}")
        return 2
    argv = (["--config", args.config] if args.config is not None else []) + list(args.extra)
    return train(argv)  # bad input is an InputError: `rlce-trl` prints it as one line


def main_recipes(args: argparse.Namespace) -> int:
    try:
        if args.name:
            path = resolve_recipe(args.name)
            print(path if args.path else path.read_text(encoding="utf-8"), end="\n" if args.path else "")
            return 0
        recipes = list_recipes()
    except FileNotFoundError as error:
        raise InputError(str(error)) from None
    width = max(len(p.stem) for p in recipes)
    for path in recipes:
        print(f"{path.stem:<{width}}  {describe(path)}")
    print(f"\n{len(recipes)} recipes in {recipes[0].parent}. `rlce-trl recipes NAME` prints one; "
          "`rlce-trl train --config NAME` runs it.")
    return 0
