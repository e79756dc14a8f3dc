"""`rlce-trl compare`: the paper's comparison (Table 1) for one task, as one resumable command.

    rlce-trl compare --task <task> --methods rlce,usc,policy_judge,rar,rler --seeds 1,2,3 \\
        --train_file hba/<task>/train.jsonl --validation_file hba/<task>/validation.jsonl \\
        --test_file hba/<task>/test.jsonl --media_root hba/media \\
        --launcher "accelerate launch --config_file configs/accelerate/zero3.yaml" --output_dir runs/compare_<task>
    rlce-trl compare --task my_task.yaml --methods rlce,usc --output_dir runs/compare_mine   # your own task file

For every (method, seed) cell it trains the method's recipe (`<task>_<method>` from `rlce-trl recipes`, or
`--recipe_dir`) with that seed under the launcher, validating on the validation split at the paper's interval (appendix
A: RLCE every second cycle, the other GRPO baselines every 12 steps, the rubric ones with patience 6; co-evolution
methods after every round), then evaluates the best-on-validation checkpoint on the test split with the task's metric
(`rlce-trl evaluate`). The base model is evaluated once. A cell that finished is never rerun: `train.json` marks a
finished training, `done.json` a finished evaluation, so rerunning the same command continues where it stopped. The
table (`comparison.md`, `.json`, `.png`) is rewritten after every cell.

Everything after `--` overrides recipe keys in every cell (e.g. `-- --max_steps 2 --use_vllm false`).
"""

from __future__ import annotations

import argparse
import shlex

from ..errors import positive_int, print_error
from . import paper
from .cells import CellFailedError, cell_dir, eval_arguments, run_base, run_cell, train_arguments, write
from .plan import make_plan


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", required=True,
                        help=f"One of {', '.join(paper.TASKS)}, or your own task file (YAML; its train, validation "
                        "and test splits).")
    parser.add_argument("--recipe_task", default=None,
                        help="With a task file: the built-in task whose recipes (`<recipe_task>_<method>.yaml`, "
                        "shipped or in --recipe_dir) train on it (default prefeval, the text recipes).")
    parser.add_argument("--methods", required=True,
                        help="Comma-separated methods (recipe suffixes), e.g. rlce,usc,policy_judge,rar,rler. Known: "
                        + ", ".join(paper.METHODS) + ".")
    parser.add_argument("--seeds", default="1,2,3", help="Comma-separated training seeds (the paper: three).")
    parser.add_argument("--output_dir", required=True, help="The comparison's folder (cells, logs, the table).")
    parser.add_argument("--launcher", default="python",
                        help="What starts a training run: `python` (this interpreter, one process) or a launcher "
                        "command such as \"accelerate launch --config_file configs/accelerate/zero3.yaml\"; the "
                        "command appends `-m rlce_trl.cli train ...`.")
    parser.add_argument("--devices", type=positive_int, default=None,
                        help="Devices (GPUs) one training run holds, for the device-hours; default: the launcher's "
                        "--num_processes / --nproc_per_node (or its accelerate config's num_processes), else 1.")
    parser.add_argument("--recipe_dir", default=None,
                        help="Folder with <task>_<method>.yaml recipes to use instead of the shipped ones.")
    data = parser.add_argument_group("data")
    data.add_argument("--data", default=None,
                      help="PrefEval: a folder written by `rlce-trl prepare-prefeval` (train / validation / test per "
                      "form) or `sample` (the bundled preference sample; its test split doubles as validation).")
    data.add_argument("--prefeval_dir", default=None, help="PrefEval checkout: the judge prompts (PrefEval only).")
    data.add_argument("--train_file", default=None, help="HBA tasks (and co-evolution methods): the train split.")
    data.add_argument("--validation_file", default=None, help="HBA tasks: the validation split (with gold).")
    data.add_argument("--test_file", default=None, help="HBA tasks: the test split (with gold).")
    data.add_argument("--media_root", default=None, help="HBA tasks: the folder the clip paths are relative to.")
    judge = parser.add_argument_group("LLM judge (free-text tasks such as PrefEval: validation and test scoring)")
    judge.add_argument("--judge_base_url", default=None, help="OpenAI-compatible judge endpoint (.../v1).")
    judge.add_argument("--judge_model", default=None, help="Model name at the judge endpoint.")
    judge.add_argument("--judge_api_key_env", default="OPENAI_API_KEY", help="Variable holding the judge's key.")
    protocol = parser.add_argument_group("protocol (defaults: the paper's)")
    protocol.add_argument("--validation_steps", type=positive_int, default=None,
                          help="Validate every N optimizer steps in every GRPO cell (default: each method's interval "
                          "in the paper; lower it for short runs).")
    protocol.add_argument("--validation_limit", type=positive_int, default=None,
                          help="Validate on the first N rows only.")
    protocol.add_argument("--selection", default="auto", choices=["auto", "in_training", "checkpoints"],
                          help="in_training: the training run validates every N steps and keeps <output_dir>/best "
                          "(early stop with patience); checkpoints: the run saves a checkpoint every N steps and each "
                          "is validated afterwards with `rlce-trl evaluate` (the same choice, for sharded models that "
                          "cannot generate on one process). auto: checkpoints under a DeepSpeed ZeRO-3 launcher.")
    protocol.add_argument("--test_limit", type=positive_int, default=None,
                          help="Test on the first N rows only (smoke runs).")
    protocol.add_argument("--max_new_tokens", type=positive_int, default=512, help="Greedy tokens per test response.")
    protocol.add_argument("--eval_backend", default="auto", choices=["auto", "transformers", "vllm"],
                          help="Generation backend of the test evaluation (`rlce-trl evaluate --backend`).")
    protocol.add_argument("--eval_batch_size", type=positive_int, default=8, help="Rows per test generation call.")
    protocol.add_argument("--skip_base", action="store_true", help="Do not evaluate the base model (no Δ column).")
    parser.add_argument("--keep_going", action="store_true", help="After a failed cell, go on with the others.")
    parser.add_argument("--dry_run", action="store_true", help="Print every cell's commands and exit.")
    parser.add_argument("--table_only", action="store_true", help="Write the table from the finished cells only.")
    parser.add_argument("overrides", nargs=argparse.REMAINDER,
                        help="After `--`: recipe keys overridden in every cell (e.g. -- --max_steps 2).")


def main(args: argparse.Namespace) -> int:
    plan = make_plan(args)
    if args.dry_run:
        if not args.skip_base:
            print("# base: " + shlex.join(eval_arguments(args, plan, plan["model"], cell_dir(plan, "base", None)
                                                         / "test")))
        for method in plan["methods"]:
            for seed in plan["seeds"]:
                print(f"# {method} seed {seed}: " + shlex.join([*plan["launcher"],
                                                               *train_arguments(args, plan, method, seed)]))
        return 0
    plan["output_dir"].mkdir(parents=True, exist_ok=True)
    failures = []
    if not args.table_only:
        cells = ([("base", None)] if not args.skip_base else []) + [
            (m, s) for s in plan["seeds"] for m in plan["methods"]]
        for method, seed in cells:
            try:
                if method == "base":
                    run_base(args, plan)
                else:
                    run_cell(args, plan, method, seed)
            except CellFailedError as error:
                failures.append(str(error))
                print_error(error)
                if not args.keep_going:
                    break
            write(plan)
    table = write(plan)
    print((plan["output_dir"] / "comparison.md").read_text(encoding="utf-8"))
    print(f"wrote {plan['output_dir']}/comparison.md, comparison.json, comparison.png")
    if failures:
        return 1
    finished = not any(row["missing_seeds"] for row in table["rows"])
    finished = finished and (args.skip_base or table["base"]["score"] is not None)
    return 0 if finished or args.table_only else 1
