"""The plan of a comparison: its cells, recipes, launcher and devices, and the checks of its inputs (one line
naming the fix, before anything trains)."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

from ..data.prefeval import TASK as PREFEVAL_TASK
from ..data.tasks import get_task, is_task_file, load_task
from ..errors import InputError, MissingInputError, output_dir_error, raise_problems
from ..evaluation.judges import judge_url_problem
from ..training.recipes import load_recipe, recipes_dir
from . import paper


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _accelerate_config(launcher: list[str]) -> dict:
    """The accelerate config the launcher's `--config_file` names ({} without one, or when it cannot be read)."""
    if "--config_file" not in launcher or launcher.index("--config_file") + 1 >= len(launcher):
        return {}
    import yaml

    try:
        config = yaml.safe_load(Path(launcher[launcher.index("--config_file") + 1]).read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return config if isinstance(config, dict) else {}


def _devices_of(launcher: list[str]) -> int:
    if match := re.search(r"--(?:num_processes|nproc_per_node|nproc-per-node)[= ](\d+)", " ".join(launcher)):
        return int(match.group(1))
    try:
        return int(_accelerate_config(launcher).get("num_processes") or 1)
    except (ValueError, TypeError):
        return 1


def _has_matplotlib() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def _zero3(launcher: list[str]) -> bool:
    """Whether the launcher's accelerate config shards the model with DeepSpeed ZeRO-3."""
    config = _accelerate_config(launcher)
    deepspeed = config.get("deepspeed_config") or {}
    return config.get("distributed_type") == "DEEPSPEED" and int(deepspeed.get("zero_stage") or 0) == 3


def _override(overrides: list[str], key: str) -> str | None:
    flag = f"--{key}"
    for i, item in enumerate(overrides):
        if item == flag and i + 1 < len(overrides):
            return overrides[i + 1]
        if item.startswith(flag + "="):
            return item.split("=", 1)[1]
    return None


def _recipe(args, method: str, recipe_task: str) -> Path:
    name = f"{recipe_task}_{method}.yaml"
    if args.recipe_dir:
        path = Path(args.recipe_dir) / name
        if not path.is_file():
            raise MissingInputError(f"--recipe_dir {args.recipe_dir!r} has no {name}: add it or drop --recipe_dir.")
        return path
    path = recipes_dir() / name
    if not path.is_file():
        raise MissingInputError(f"no shipped recipe {name} for method {method!r} on {recipe_task}: pick methods from "
                                "`rlce-trl recipes` or pass --recipe_dir with your own.")
    return path


def make_plan(args: argparse.Namespace) -> dict:
    """Check every flag, recipe and file (no model is loaded) and return the grid: an `InputError` naming the fix
    for the first problem."""
    overrides = list(args.overrides or [])
    if overrides[:1] == ["--"]:
        overrides = overrides[1:]
    if overrides and not overrides[0].startswith("--"):
        raise InputError(f"unexpected argument {overrides[0]!r}: recipe overrides go after `--` as `--key value`.")
    task_file = None
    if is_task_file(args.task):  # a user's task file: its splits, the recipes of a shipped text task
        task_file = load_task(args.task)
        recipe_task = args.recipe_task or PREFEVAL_TASK  # the paper's text task
        if recipe_task not in paper.TASKS:
            raise InputError(f"--recipe_task {recipe_task!r}: use one of {', '.join(paper.TASKS)} (whose shipped "
                             "recipes `<recipe_task>_<method>.yaml` train on your task).")
    else:
        if args.task not in paper.TASKS:
            raise InputError(f"--task {args.task!r}: use one of {', '.join(paper.TASKS)}, or your task file (YAML).")
        if args.recipe_task:
            raise InputError("--recipe_task applies to a task file (--task my_task.yaml): drop it.")
        recipe_task = args.task
    task = task_file.name if task_file else args.task
    if not _has_matplotlib():
        raise MissingInputError("rlce-trl compare draws comparison.png with matplotlib, which is not installed: "
                                "pip install 'rlce-trl[analysis]'.")
    methods = _csv(args.methods)
    if not methods:
        raise InputError("--methods is empty: pass e.g. --methods rlce,usc.")
    if len(set(methods)) != len(methods):
        raise InputError(f"--methods {args.methods!r} names a method twice: list each once.")
    for method in methods:
        if not re.fullmatch(r"[A-Za-z0-9_]+", method):
            raise InputError(f"--methods: {method!r} is not a method name (letters, digits, _), e.g. rlce,usc.")
        if method == "base":
            raise InputError("--methods: the base model is always evaluated (drop `base`; --skip_base skips it).")
    try:
        seeds = [int(s) for s in _csv(args.seeds)]
    except ValueError:
        raise InputError(f"--seeds {args.seeds!r}: pass comma-separated integers, e.g. --seeds 1,2,3.") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise InputError(f"--seeds {args.seeds!r}: pass distinct integers, e.g. --seeds 1,2,3.")
    raise_problems([output_dir_error(args.output_dir)])
    launcher = shlex.split(args.launcher) if args.launcher.strip() else []
    if not launcher:
        raise InputError("--launcher is empty: pass `python` or a launcher command such as `accelerate launch`.")
    if launcher == ["python"]:
        launcher = [sys.executable]
    elif shutil.which(launcher[0]) is None:
        raise MissingInputError(f"--launcher: {launcher[0]!r} is not an executable on PATH: install it or pass "
                                "--launcher python.")
    devices = args.devices if args.devices is not None else _devices_of(launcher)
    if devices < 1:
        raise InputError(f"--devices {devices}: use 1 or more.")

    recipes = {m: _recipe(args, m, recipe_task) for m in methods}
    loaded = {m: load_recipe(p) for m, p in recipes.items()}
    kinds = {m: r.kind for m, r in loaded.items()}
    for method, recipe in loaded.items():
        if "tta_split" in recipe.values:
            raise InputError(f"{recipes[method].name} is a test-time recipe (tta_split): the comparison trains on "
                             "the train split; use the training recipe.")
        if recipe.task != recipe_task:
            raise InputError(f"{recipes[method].name} is written for {recipe.task}, not {recipe_task}: fix the "
                             "recipe.")
        if task_file is not None and recipe.kind == "coevolve":
            raise InputError(f"--methods {method}: a co-evolution method does not take a task file (--task "
                             f"{args.task}): compare GRPO methods on it, e.g. --methods rlce,usc.")
    model = _override(overrides, "model_name_or_path")
    if model is None:
        models = {m: r.values.get("model_name_or_path") for m, r in loaded.items()}
        if len(set(models.values())) > 1:
            listing = ", ".join(f"{m}: {v}" for m, v in models.items())
            raise InputError(f"the recipes start from different models ({listing}): Δ needs one base model; pass "
                             "-- --model_name_or_path <model> to use one for all.")
        model = next(iter(models.values()))
    if not model:
        raise InputError("no model: the recipes name none; pass -- --model_name_or_path <model>.")

    if task_file is not None:
        _check_task_file(args, task_file)
    else:
        _check_data(args, methods, kinds)
    _check_judge(args, task)
    selection = args.selection if args.selection != "auto" else "checkpoints" if _zero3(launcher) else "in_training"
    if selection == "checkpoints" and args.validation_limit and get_task(task).forms and args.data != "sample":
        raise InputError("--validation_limit with checkpoint selection applies to a single validation file, not to a "
                         "PrefEval folder: drop --validation_limit.")
    return {"selection": selection, "task": task, "recipe_task": recipe_task,
            "task_file": str(task_file.path.resolve()) if task_file else None,
            "methods": methods, "seeds": seeds, "launcher": launcher,
            "devices": devices, "recipes": recipes, "kinds": kinds, "model": model, "overrides": overrides,
            "output_dir": Path(args.output_dir)}


def _check_data(args, methods: list[str], kinds: dict) -> None:
    def need_file(flag: str) -> None:
        value = getattr(args, flag)
        if not value:
            raise InputError(f"--task {args.task} needs --{flag} (the {flag.split('_')[0]} split as JSONL).")
        if not Path(value).is_file():
            raise MissingInputError(f"--{flag} {value!r} does not exist or is not a file: pass an existing JSONL.")

    forms = get_task(args.task).forms  # a prepared folder of the task's forms (PrefEval), or `sample`
    if forms:
        if args.test_limit and args.data and args.data != "sample":
            raise InputError("--test_limit applies to a single test file, not to a PrefEval folder: drop it.")
        if not args.data:
            raise InputError("--task prefeval needs --data: a folder from `rlce-trl prepare-prefeval` or `sample`.")
        if args.data != "sample":
            root = Path(args.data)
            for form in forms:
                for split in ("train", "validation", "test"):
                    if not (root / form / f"{split}.jsonl").is_file():
                        raise MissingInputError(f"--data {args.data!r} has no {form}/{split}.jsonl: run `rlce-trl "
                                                "prepare-prefeval --output_dir <folder>` first, or pass sample.")
        if args.prefeval_dir is None and not os.environ.get("PREFEVAL_DIR"):
            raise InputError("--task prefeval needs --prefeval_dir (the checkout whose judge prompts score the "
                             "responses) or $PREFEVAL_DIR.")
        if args.prefeval_dir and not Path(args.prefeval_dir).is_dir():
            raise MissingInputError(f"--prefeval_dir {args.prefeval_dir!r} is not a folder: pass the checkout.")
        if any(kinds[m] == "coevolve" for m in methods):
            need_file("train_file")
            need_file("validation_file")
    else:
        for flag in ("train_file", "validation_file", "test_file"):
            need_file(flag)
        if not args.media_root or not Path(args.media_root).is_dir():
            raise MissingInputError(f"--task {args.task} needs --media_root, the folder the clip paths are relative "
                                    f"to (got {args.media_root!r}).")


def _check_task_file(args, task_file) -> None:
    """A task file names its own splits: train, validation (with gold) and test (with gold), each read and checked
    here (a missing column, an empty split, a gold outside the labels: one line)."""
    flags = ("data", "train_file", "validation_file", "test_file", "media_root", "prefeval_dir")
    given = [f"--{flag}" for flag in flags if getattr(args, flag)]
    if given:
        raise InputError(f"{', '.join(given)} with a task file (--task {args.task}): the task file names its splits; "
                         "drop them.")
    for split in ("train", "validation", "test"):
        if split not in task_file.splits():
            raise InputError(f"{task_file.path.name} has no {split!r} split: the comparison trains on train, selects "
                             "on validation and reports test; add it under `data:`.")
    for split in ("train", "validation", "test"):
        task_file.rows(split, with_gold=split != "train")


def _check_judge(args, task: str) -> None:
    if get_task(task).needs_judge:  # free text scored by the LLM judge (validation and test)
        if not (args.judge_base_url and args.judge_model):
            raise InputError(f"--task {args.task} is scored by an LLM judge: pass --judge_base_url and --judge_model "
                             "(any OpenAI-compatible endpoint, e.g. `vllm serve`).")
    raise_problems([judge_url_problem(args.judge_base_url)])
