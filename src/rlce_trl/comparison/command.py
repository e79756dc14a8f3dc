"""`rlce-trl compare`: the paper's comparison (Table 1) for one task, as one resumable command.

    rlce-trl compare --task mosei --methods rlce,usc,policy_judge,rar,rler --seeds 1,2,3 \\
        --train_file hba/mosei/train.jsonl --validation_file hba/mosei/validation.jsonl \\
        --test_file hba/mosei/test.jsonl --media_root hba/media \\
        --launcher "accelerate launch --config_file configs/accelerate/zero3.yaml" --output_dir runs/compare_mosei

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
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..errors import InputError, MissingInputError, positive_int
from . import paper

FREE_TEXT = ("prefeval", "intentqa")  # scored by the LLM judge (validation and test)


class CellFailedError(RuntimeError):
    """A training or evaluation subprocess of a cell exited with an error (its log names why)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `rlce-trl compare`."""
    parser.add_argument("--task", required=True, help=f"One of {', '.join(paper.TASKS)}.")
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
    judge = parser.add_argument_group("LLM judge (PrefEval and IntentQA: validation and test scoring)")
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


# -- the plan -------------------------------------------------------------------------------------------------------
def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _devices_of(launcher: list[str]) -> int:
    text = " ".join(launcher)
    match = re.search(r"--(?:num_processes|nproc_per_node|nproc-per-node)[= ](\d+)", text)
    if match:
        return int(match.group(1))
    if "--config_file" in launcher and launcher.index("--config_file") + 1 < len(launcher):
        import yaml

        try:
            config = yaml.safe_load(Path(launcher[launcher.index("--config_file") + 1]).read_text()) or {}
            return int(config.get("num_processes") or 1)
        except (OSError, ValueError, TypeError, yaml.YAMLError):
            return 1
    return 1


def _has_matplotlib() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def _zero3(launcher: list[str]) -> bool:
    """Whether the launcher's accelerate config shards the model with DeepSpeed ZeRO-3."""
    if "--config_file" not in launcher or launcher.index("--config_file") + 1 >= len(launcher):
        return False
    import yaml

    try:
        config = yaml.safe_load(Path(launcher[launcher.index("--config_file") + 1]).read_text()) or {}
    except (OSError, yaml.YAMLError):
        return False
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


def _recipe(args, method: str) -> Path:
    name = f"{args.task}_{method}.yaml"
    if args.recipe_dir:
        path = Path(args.recipe_dir) / name
        if not path.is_file():
            raise MissingInputError(f"--recipe_dir {args.recipe_dir!r} has no {name}: add it or drop --recipe_dir.")
        return path
    from ..scripts.recipes import recipes_dir

    path = recipes_dir() / name
    if not path.is_file():
        raise MissingInputError(f"no shipped recipe {name} for method {method!r} on {args.task}: pick methods from "
                                "`rlce-trl recipes` or pass --recipe_dir with your own.")
    return path


def _load_recipe(path: Path) -> dict:
    import yaml

    try:
        content = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        first = str(error).splitlines()[0]
        raise InputError(f"{path} is not valid YAML ({first}): fix it or pass another --recipe_dir.") from None
    if not isinstance(content, dict):
        raise InputError(f"{path} is not a recipe (a YAML mapping of argument names to values).")
    return content


def make_plan(args: argparse.Namespace) -> dict:
    """Check every flag, recipe and file (no model is loaded) and return the grid: an `InputError` naming the fix
    for the first problem."""
    overrides = list(args.overrides or [])
    if overrides[:1] == ["--"]:
        overrides = overrides[1:]
    if overrides and not overrides[0].startswith("--"):
        raise InputError(f"unexpected argument {overrides[0]!r}: recipe overrides go after `--` as `--key value`.")
    if args.task not in paper.TASKS:
        raise InputError(f"--task {args.task!r}: use one of {', '.join(paper.TASKS)}.")
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
    if Path(args.output_dir).exists() and not Path(args.output_dir).is_dir():
        raise InputError(f"--output_dir {args.output_dir!r} is a file: pass a folder.")
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
    for name in ("validation_steps", "validation_limit", "test_limit", "max_new_tokens", "eval_batch_size"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise InputError(f"--{name} {value}: use 1 or more.")

    recipes = {m: _recipe(args, m) for m in methods}
    contents = {m: _load_recipe(p) for m, p in recipes.items()}
    kinds = {}
    for method, content in contents.items():
        kinds[method] = "coevolve" if "coevolve_method" in content else "train"
        if "tta_split" in content:
            raise InputError(f"{recipes[method].name} is a test-time recipe (tta_split): the comparison trains on "
                             "the train split; use the training recipe.")
        task = content.get("hba_task") or "prefeval"
        if task != args.task:
            raise InputError(f"{recipes[method].name} is written for {task}, not --task {args.task}: fix the recipe.")
    model = _override(overrides, "model_name_or_path")
    if model is None:
        models = {m: c.get("model_name_or_path") for m, c in contents.items()}
        if len(set(models.values())) > 1:
            listing = ", ".join(f"{m}: {v}" for m, v in models.items())
            raise InputError(f"the recipes start from different models ({listing}): Δ needs one base model; pass "
                             "-- --model_name_or_path <model> to use one for all.")
        model = next(iter(models.values()))
    if not model:
        raise InputError("no model: the recipes name none; pass -- --model_name_or_path <model>.")

    _check_data(args, methods, kinds)
    selection = args.selection if args.selection != "auto" else "checkpoints" if _zero3(launcher) else "in_training"
    if selection == "checkpoints" and args.validation_limit and args.task == "prefeval" and args.data != "sample":
        raise InputError("--validation_limit with checkpoint selection applies to a single validation file, not to a "
                         "PrefEval folder: drop --validation_limit.")
    return {"selection": selection, "task": args.task, "methods": methods, "seeds": seeds, "launcher": launcher,
            "devices": devices, "recipes": recipes, "kinds": kinds, "model": model, "overrides": overrides,
            "output_dir": Path(args.output_dir)}


def _check_data(args, methods: list[str], kinds: dict) -> None:
    def need_file(flag: str) -> None:
        value = getattr(args, flag)
        if not value:
            raise InputError(f"--task {args.task} needs --{flag} (the {flag.split('_')[0]} split as JSONL).")
        if not Path(value).is_file():
            raise MissingInputError(f"--{flag} {value!r} does not exist or is not a file: pass an existing JSONL.")

    if args.task == "prefeval":
        if args.test_limit and args.data and args.data != "sample":
            raise InputError("--test_limit applies to a single test file, not to a PrefEval folder: drop it.")
        if not args.data:
            raise InputError("--task prefeval needs --data: a folder from `rlce-trl prepare-prefeval` or `sample`.")
        if args.data != "sample":
            root = Path(args.data)
            for form in ("explicit", "choice", "persona"):
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
    if args.task in FREE_TEXT:
        if not (args.judge_base_url and args.judge_model):
            raise InputError(f"--task {args.task} is scored by an LLM judge: pass --judge_base_url and --judge_model "
                             "(any OpenAI-compatible endpoint, e.g. `vllm serve`).")
    if args.judge_base_url and not args.judge_base_url.startswith(("http://", "https://")):
        raise InputError("--judge_base_url must start with http:// or https:// (e.g. http://127.0.0.1:8000/v1).")


# -- commands of a cell ---------------------------------------------------------------------------------------------
def cell_dir(plan: dict, method: str, seed: int | None) -> Path:
    return plan["output_dir"] / ("base" if method == "base" else f"{method}/seed{seed}")


def _judge_flags(args) -> list[str]:
    if not args.judge_base_url:
        return []
    return ["--judge_base_url", args.judge_base_url, "--judge_model", args.judge_model, "--judge_api_key_env",
            args.judge_api_key_env]


def train_arguments(args, plan: dict, method: str, seed: int) -> list[str]:
    """The arguments after the launcher that train one cell (`-m rlce_trl.cli train|coevolve ...`)."""
    out = cell_dir(plan, method, seed) / "train"
    recipe = str(plan["recipes"][method])
    if plan["kinds"][method] == "coevolve":
        argv = ["-m", "rlce_trl.cli", "coevolve", "--method", _load_recipe(plan["recipes"][method])["coevolve_method"],
                "--config", recipe, "--output_dir", str(out), "--seed", str(seed),
                "--train_file", args.train_file, "--validation_file", args.validation_file]
        argv += ["--media_root", args.media_root] if args.media_root else []
        if plan["launcher"] != [sys.executable]:
            argv += ["--coevolve_launcher", shlex.join(plan["launcher"])]
        return argv + _judge_flags(args) + plan["overrides"]
    steps, patience = paper.validation_schedule(method, args.task)
    if steps is None:  # a method the paper does not list: the recipe's own (commented) interval, else 12
        steps = paper.BASELINE_VALIDATION_STEPS
    argv = ["-m", "rlce_trl.cli", "train", "--config", recipe, "--seed", str(seed), "--output_dir", str(out)]
    if plan["selection"] == "checkpoints":  # validated afterwards, checkpoint by checkpoint
        argv += ["--save_strategy", "steps", "--save_steps", str(args.validation_steps or steps)]
    else:
        argv += ["--validation_steps", str(args.validation_steps or steps)]
        argv += ["--validation_patience", str(patience)] if patience else []
        argv += ["--validation_limit", str(args.validation_limit)] if args.validation_limit else []
    if args.task == "prefeval":
        argv += ["--dataset_name", args.data]
        argv += ["--prefeval_dir", args.prefeval_dir] if args.prefeval_dir else []
    else:
        argv += ["--train_file", args.train_file, "--validation_file", args.validation_file,
                 "--media_root", args.media_root]
    return argv + _judge_flags(args) + plan["overrides"]


def eval_arguments(args, plan: dict, checkpoint: str, out: Path, split: str = "test") -> list[str]:
    """`python -m rlce_trl.cli evaluate ...` of a checkpoint on the test (or validation) split. The preference
    sample has no validation split: its test split stands in, as in training."""
    argv = [sys.executable, "-m", "rlce_trl.cli", "evaluate", "--model_name_or_path", checkpoint,
            "--output_dir", str(out), "--max_new_tokens", str(args.max_new_tokens), "--backend", args.eval_backend,
            "--batch_size", str(args.eval_batch_size), "--no_progress"]
    if args.task == "prefeval":
        argv += ["--data", args.data, "--split", split]
        argv += ["--prefeval_dir", args.prefeval_dir] if args.prefeval_dir else []
    else:
        data = args.test_file if split == "test" else args.validation_file
        argv += ["--data", data, "--hba_task", args.task, "--media_root", args.media_root]
    limit = args.test_limit if split == "test" else args.validation_limit
    argv += ["--limit", str(limit)] if limit else []
    return argv + _judge_flags(args)


# -- running --------------------------------------------------------------------------------------------------------
def _run(command: list[str], log: Path, what: str) -> float:
    """Run `command` with its output in `log`; the wall seconds, or `CellFailedError` with the log's last line."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"\n$ {shlex.join(command)}\n")
        f.flush()
        code = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, check=False).returncode
    wall = time.monotonic() - start
    if code != 0:
        lines = [line.strip() for line in log.read_text(encoding="utf-8", errors="replace").splitlines()
                 if line.strip()]
        raise CellFailedError(f"{what} failed (exit {code}): {lines[-1] if lines else 'no output'} (log: {log})")
    return wall


def _read_json(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_json(path: Path, record: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2), encoding="utf-8")
    os.replace(tmp, path)


def _score(summary_path: Path) -> float | None:
    summary = _read_json(summary_path) or {}
    return summary.get("score", summary.get("prefeval_macro"))


def _select_checkpoints(args, plan: dict, method: str, seed: int, train_dir: Path) -> tuple[str, dict]:
    """Validate a finished run's checkpoints in step order (then its final model) with `rlce-trl evaluate` and keep
    the best, stopping after `patience` validations without improvement as early stopping would have."""
    steps = sorted((int(p.name.split("-")[1]), p) for p in train_dir.glob("checkpoint-*")
                   if p.name.split("-")[1].isdigit() and (p / "config.json").is_file())
    candidates = [(step, str(path)) for step, path in steps]
    if (train_dir / "config.json").is_file():
        candidates.append(("final", str(train_dir)))
    if not candidates:
        raise CellFailedError(f"{method} seed {seed}: no checkpoint in {train_dir} to validate (the run saved none: "
                              "check save_strategy in the overrides).")
    _, patience = paper.validation_schedule(method, args.task)
    here = train_dir.parent
    best, history, bad, wall = None, [], 0, 0.0
    for step, path in candidates:
        out = here / "validation" / f"step-{step}"
        wall += _run(eval_arguments(args, plan, path, out, split="validation"), here / "validation.log",
                     f"{method} seed {seed}: validation of step {step}")
        score = _score(out / "summary.json")
        improved = score is not None and (best is None or score > best[1])
        history.append({"step": step, "score": score, "best": improved})
        if improved:
            best, bad = (step, score, path), 0
        else:
            bad += 1
            if patience and bad >= patience:
                break
    if best is None:
        raise CellFailedError(f"{method} seed {seed}: no validation produced a score ({here / 'validation'}).")
    return best[2], {"best_step": best[0], "best_validation": best[1], "validations": history,
                     "validation_wall_s": round(wall, 3)}


def _best_checkpoint(plan: dict, method: str, train_dir: Path) -> tuple[str, dict]:
    """The best-on-validation checkpoint of a finished training and what its selection recorded."""
    if plan["kinds"][method] == "coevolve":
        state = _read_json(train_dir / "state.json") or {}
        best = state.get("best")
        if not best:
            raise CellFailedError(f"{method}: the co-evolution run in {train_dir} has no validated round (state.json "
                                  "'best' is empty): check its validation_file and log.")
        return best["checkpoint"], {"best_round": best["round"], "best_validation": best["score"]}
    best = train_dir / "best"
    record = _read_json(train_dir / "best.json") or {}
    if not (best / "config.json").is_file():
        raise CellFailedError(f"{method}: no best checkpoint in {best}: validation never ran (the run ended before "
                              f"its first validation): delete {train_dir.parent} and rerun with a lower "
                              "--validation_steps.")
    return str(best), {"best_step": record.get("best_step"), "best_validation": record.get("best_score"),
                       "stopped_early": record.get("stopped_early")}


def _device_hours(plan: dict, method: str, train_dir: Path, wall: float) -> float:
    if plan["kinds"][method] == "coevolve":  # the driver accounts every phase's devices itself
        state = _read_json(train_dir / "state.json") or {}
        return sum(step.get("device_hours", 0.0) for step in state.get("steps", []))
    return wall * plan["devices"] / 3600


def run_cell(args, plan: dict, method: str, seed: int, log=print) -> dict:
    """Train (unless `train.json` says it is done) and evaluate (unless `done.json` does) one cell."""
    here = cell_dir(plan, method, seed)
    done = _read_json(here / "done.json")
    if done is not None:
        return done
    train_args = train_arguments(args, plan, method, seed)
    trained = _read_json(here / "train.json")
    if trained is not None and trained["arguments"] != train_args:
        raise InputError(f"{here} was trained with other arguments (recipe, data or overrides changed): use another "
                         "--output_dir, or delete that cell's folder to retrain it.")
    train_dir = here / "train"
    if trained is None:
        if train_dir.exists() and plan["kinds"][method] == "train":  # an interrupted run restarts from step 0
            shutil.rmtree(train_dir)
        resume = ["--resume"] if (train_dir / "state.json").is_file() else []  # a co-evolution run continues
        log(f"[{method} seed {seed}] training")
        wall = _run([*plan["launcher"], *train_args, *resume], here / "train.log", f"{method} seed {seed}: training")
        trained = {"arguments": train_args, "launcher": plan["launcher"], "devices": plan["devices"],
                   "wall_s": round(wall, 3), "device_hours": _device_hours(plan, method, train_dir, wall),
                   "checkpoint": None}
        _write_json(here / "train.json", trained)  # trained: a rerun from here on selects and tests only
    if trained.get("checkpoint") is None:
        if plan["kinds"][method] == "train" and plan["selection"] == "checkpoints":
            log(f"[{method} seed {seed}] validating the checkpoints")
            checkpoint, selection = _select_checkpoints(args, plan, method, seed, train_dir)
            trained["device_hours"] += selection["validation_wall_s"] / 3600  # one device
        else:
            checkpoint, selection = _best_checkpoint(plan, method, train_dir)
        trained = {**trained, "checkpoint": checkpoint, **selection}
        _write_json(here / "train.json", trained)
    log(f"[{method} seed {seed}] test evaluation of {trained['checkpoint']}")
    eval_wall = _run(eval_arguments(args, plan, trained["checkpoint"], here / "test"), here / "eval.log",
                     f"{method} seed {seed}: test evaluation")
    score = _score(here / "test" / "summary.json")
    record = {"method": method, "seed": seed, "score": score, "train_wall_s": trained["wall_s"],
              "eval_wall_s": round(eval_wall, 3), "devices": trained["devices"],
              "device_hours": trained["device_hours"] + eval_wall / 3600,
              "checkpoint": trained["checkpoint"], "best_step": trained.get("best_step"),
              "best_round": trained.get("best_round"), "best_validation": trained.get("best_validation")}
    if score is None:
        raise CellFailedError(f"{method} seed {seed}: the test evaluation produced no score ({here / 'test'}).")
    _write_json(here / "done.json", record)
    return record


def run_base(args, plan: dict, log=print) -> dict:
    """Evaluate the base model once (`base/done.json`)."""
    here = cell_dir(plan, "base", None)
    done = _read_json(here / "done.json")
    if done is not None:
        return done
    model = plan["model"]
    from ..models import MODEL_ALIASES

    if model.lower() in MODEL_ALIASES:  # an offline alias: the folder it converts to
        from ..models import resolve_model

        model = resolve_model(model)
    log(f"[base] test evaluation of {model}")
    wall = _run(eval_arguments(args, plan, model, here / "test"), here / "eval.log", "base model: test evaluation")
    record = {"method": "base", "model": plan["model"], "score": _score(here / "test" / "summary.json"),
              "eval_wall_s": round(wall, 3)}
    _write_json(here / "done.json", record)
    return record


def collect(plan: dict) -> tuple[dict, dict | None]:
    """The finished cells (`done.json`) and the base record."""
    cells = {}
    for method in plan["methods"]:
        for seed in plan["seeds"]:
            record = _read_json(cell_dir(plan, method, seed) / "done.json")
            if record is not None:
                cells[(method, seed)] = record
    return cells, _read_json(cell_dir(plan, "base", None) / "done.json")


def write(plan: dict) -> dict:
    from .table import build_table, write_table

    cells, base = collect(plan)
    table = build_table(plan["task"], plan["model"], plan["methods"], plan["seeds"], cells, base)
    write_table(table, plan["output_dir"])
    return table


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
                print(f"error: {error}", file=sys.stderr)
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
