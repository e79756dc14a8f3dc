# Copyright the rlce-trl developers. Licensed under the Apache License, Version 2.0.
"""
RLCE on PrefEval: TRL's GRPO script with `RLCEGRPOTrainer` in place of `GRPOTrainer`.

    # quickstart: CPU, offline, a few minutes (SmolLM2-135M-Instruct, the bundled preference sample)
    rlce-trl train --config quickstart            # installed package (recipes: `rlce-trl recipes`)
    python examples/train_prefeval.py --config configs/quickstart.yaml   # a clone

    # the paper's recipe (GPUs; PrefEval from a local checkout)
    accelerate launch --config_file configs/accelerate/multi_gpu.yaml examples/train_prefeval.py \
        --config configs/prefeval_rlce.yaml --prefeval_dir /path/to/PrefEval

Any recipe key can be overridden on the command line (`--max_steps 2`), and `--use_peft` trains a LoRA adapter
instead (the verifier is then the base model with the adapter disabled).

Data (`--dataset_name`):
    prefeval   built from a PrefEval checkout (`--prefeval_dir`, else $PREFEVAL_DIR) as in the paper (appendix A)
    sample     the small preference sample shipped with rlce-trl (offline; for the quickstart and smoke tests)
    <folder>   the output of `rlce-trl prepare-prefeval` (`<folder>/<form>/<split>.jsonl`)
`--prefeval_form explicit|choice|persona|all` picks the form(s) to train on (all: the three forms' rows together).
"""

import os
from dataclasses import dataclass, field

from trl import ModelConfig

from rlce_trl.config import RLCEGRPOConfig
from rlce_trl.data.prefeval import FORMS
from rlce_trl.errors import InputError
from rlce_trl.scripts.tta import adaptation_rows, check_no_gold, tta_callbacks
from rlce_trl.scripts.utils import (
    RecipeParser,
    RLCEScriptArguments,
    add_prompt_suffix,
    filter_long_prompts,
    make_judge,
    method_rows,
    prepare_run,
    run_script,
    train_rlce,
    validation_callbacks,
)


@dataclass
class PrefEvalScriptArguments(RLCEScriptArguments):
    """
    Args:
        dataset_name (`str`, *optional*, defaults to `"prefeval"`):
            `"prefeval"` (built from a checkout), `"sample"` (bundled preference sample) or a folder written by
            `rlce-trl prepare-prefeval`.
        prefeval_dir (`str`, *optional*):
            The PrefEval checkout (defaults to `$PREFEVAL_DIR`).
        prefeval_form (`str`, *optional*, defaults to `"all"`):
            `"explicit"`, `"choice"`, `"persona"` or `"all"`.
        prefeval_seed (`int`, *optional*, defaults to `42`):
            Seed of the padding draw and of the split.
    """

    dataset_name: str = field(
        default="prefeval",
        metadata={"help": "'prefeval' (from a checkout), 'sample' (bundled) or a prepare-prefeval output folder."},
    )
    prefeval_dir: str | None = field(default=None, metadata={"help": "PrefEval checkout (default: $PREFEVAL_DIR)."})
    prefeval_form: str = field(
        default="all", metadata={"help": "Preference form to train on.", "choices": [*FORMS, "all"]}
    )
    prefeval_seed: int = field(default=42, metadata={"help": "Seed of the padding draw and of the split."})


def load_rows(script_args) -> tuple[list[dict], list[dict], str]:
    """(train rows, validation rows, dataset description); with `tta_split`, the rows of that split twice (the
    caller removes the gold from the first copy)."""
    from rlce_trl.data import build_prefeval, load_preference_sample, read_jsonl

    forms = FORMS if script_args.prefeval_form == "all" else (script_args.prefeval_form,)
    names = (script_args.tta_split,) * 2 if script_args.tta_split else ("train", "validation")
    if script_args.dataset_name == "sample":
        names = tuple("test" if n == "validation" else n for n in names)  # the sample has train and test
        if any(n not in ("train", "test") for n in names):
            raise InputError(f"tta_split={script_args.tta_split!r}: the preference sample has 'train' and 'test'.")
        return load_preference_sample(names[0]), load_preference_sample(names[1]), "rlce-trl preference sample"
    if script_args.dataset_name == "prefeval":
        built = build_prefeval(script_args.prefeval_dir, forms=forms, seed=script_args.prefeval_seed)
        splits = {s: [r for f in forms for r in built[f][s]] for s in set(names)}
    elif os.path.isdir(script_args.dataset_name):
        root = script_args.dataset_name
        splits = {s: [r for f in forms for r in read_jsonl(os.path.join(root, f, f"{s}.jsonl"))] for s in set(names)}
    else:
        raise InputError(f"dataset_name={script_args.dataset_name!r}: use 'prefeval', 'sample' or a folder written "
                         "by `rlce-trl prepare-prefeval`.")
    return splits[names[0]], splits[names[1]], f"PrefEval ({script_args.prefeval_form} form{'s' * (len(forms) > 1)})"


def main(script_args, training_args, model_args):
    from rlce_trl.data import to_dataset

    prepare_run(script_args, training_args, model_args)
    train_rows, validation_rows, dataset = load_rows(script_args)
    if script_args.tta_split:  # adapt on the split without its gold, evaluate on it with gold after every pass
        validation_rows = validation_rows[: script_args.validation_limit or None]
        train_rows = adaptation_rows(validation_rows)
    train_rows = add_prompt_suffix(train_rows, script_args.prompt_suffix)
    train_rows = method_rows(train_rows, training_args.reward_method, training_args.rlce_labels_column)
    validation_rows = add_prompt_suffix(validation_rows, script_args.prompt_suffix)
    train_rows = filter_long_prompts(train_rows, model_args.model_name_or_path, script_args.max_prompt_length,
                                     training_args.chat_template_kwargs)
    check_no_gold(train_rows)
    if script_args.tta_split:
        judge = make_judge(script_args, validation_rows, script_args.prefeval_dir) if script_args.judge_base_url \
            else None
        callbacks = tta_callbacks(script_args, training_args, validation_rows, judge)
    else:
        callbacks = validation_callbacks(script_args, training_args, validation_rows, needs_judge=True,
                                         prefeval_dir=script_args.prefeval_dir)
    return train_rlce(script_args, training_args, model_args, to_dataset(train_rows), callbacks, dataset)


def make_parser():
    return RecipeParser((PrefEvalScriptArguments, RLCEGRPOConfig, ModelConfig))


if __name__ == "__main__":
    run_script(make_parser, main)
