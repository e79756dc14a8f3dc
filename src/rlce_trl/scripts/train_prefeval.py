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
from rlce_trl.data import build_prefeval, load_preference_sample, read_jsonl
from rlce_trl.data.prefeval import DATASET_NAME, FORMS
from rlce_trl.data.tasks import load_hub_splits, looks_like_hub_id, read_records
from rlce_trl.errors import InputError
from rlce_trl.scripts import run_script
from rlce_trl.training.arguments import RecipeParser, RLCEScriptArguments
from rlce_trl.training.pipeline import TaskRows, task_file_rows, train


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

    dataset_name: str = field(default=DATASET_NAME, metadata={
        "help": "'prefeval' (from a checkout), 'sample' (bundled) or a prepare-prefeval output folder."})
    prefeval_dir: str | None = field(default=None, metadata={"help": "PrefEval checkout (default: $PREFEVAL_DIR)."})
    prefeval_form: str = field(
        default="all", metadata={"help": "Preference form to train on.", "choices": [*FORMS, "all"]})
    prefeval_seed: int = field(default=42, metadata={"help": "Seed of the padding draw and of the split."})


def load_rows(script_args) -> TaskRows:
    """The PrefEval rows: train and validation splits; with `tta_split`, that split as the training rows (the
    pipeline evaluates on it with its gold and trains on it without)."""
    forms = FORMS if script_args.prefeval_form == "all" else (script_args.prefeval_form,)
    names = (script_args.tta_split,) if script_args.tta_split else ("train", "validation")
    name = script_args.dataset_name
    description = f"PrefEval ({script_args.prefeval_form} form{'s' * (len(forms) > 1)})"
    if name == "sample":
        names = tuple("test" if n == "validation" else n for n in names)  # the sample has train and test
        if any(n not in ("train", "test") for n in names):
            raise InputError(f"tta_split={script_args.tta_split!r}: the preference sample has 'train' and 'test'.")
        splits = {n: load_preference_sample(n) for n in names}
        description = "rlce-trl preference sample"
    elif name == DATASET_NAME:
        built = build_prefeval(script_args.prefeval_dir, forms=forms, seed=script_args.prefeval_seed)
        splits = {s: [r for f in forms for r in built[f][s]] for s in names}
    elif os.path.isfile(name) or looks_like_hub_id(name):
        return rows_in_package_format(script_args)
    elif os.path.isdir(name):
        splits = {s: [r for f in forms for r in read_jsonl(os.path.join(name, f, f"{s}.jsonl"))] for s in names}
    else:
        raise InputError(f"dataset_name={name!r}: use 'prefeval', 'sample', a folder written by `rlce-trl "
                         "prepare-prefeval`, a JSON / JSONL / CSV / Parquet file or a Hub dataset id of rows in the "
                         "package's format (or --task for your own task file).")
    return TaskRows(train=splits[names[0]], validation=splits[names[1]] if len(names) > 1 else [],
                    description=description, free_text=True, prefeval_dir=script_args.prefeval_dir)


def rows_in_package_format(script_args) -> TaskRows:
    """`--dataset_name` as a local file or a Hub dataset id (as TRL's scripts take it) whose rows are in the
    package's format (a conversational `prompt`; optional `answer_options`; no gold in the train split). A file is
    the train split; a Hub dataset gives `dataset_train_split` and, for validation, `dataset_test_split`."""
    name = script_args.dataset_name
    if os.path.isfile(name):
        train_rows, validation_rows = read_records(name), []
    else:
        splits = load_hub_splits(name, script_args.dataset_config)
        if script_args.dataset_train_split not in splits:
            raise InputError(f"--dataset_name {name}: no {script_args.dataset_train_split!r} split (it has "
                             f"{', '.join(splits)}): set dataset_train_split.")
        train_rows = list(splits[script_args.dataset_train_split])
        test = script_args.dataset_test_split
        validation_rows = list(splits[test]) if test in splits else []
    if not train_rows:
        raise InputError(f"--dataset_name {name}: the train split is empty.")
    for k, row in enumerate(train_rows[:1] + validation_rows[:1]):
        if not isinstance(row.get("prompt"), list):
            raise InputError(f"--dataset_name {name}: row {k} has no conversational `prompt` (a list of chat "
                             "messages): write your rows in that format, or describe them in a task file (--task).")
    return TaskRows(train=train_rows, validation=validation_rows, description=os.path.basename(name),
                    free_text=not any(r.get("answer_options") for r in validation_rows or train_rows))


def main(script_args, training_args, model_args):
    rows = task_file_rows(script_args) if script_args.task else load_rows(script_args)
    return train(script_args, training_args, model_args, rows)


def make_parser():
    return RecipeParser((PrefEvalScriptArguments, RLCEGRPOConfig, ModelConfig))


if __name__ == "__main__":
    run_script(make_parser, main)
