"""One cell of the comparison: train it under the launcher, pick its best-on-validation checkpoint, evaluate it on
the test split, record it (`train.json`, `done.json`), so a rerun never repeats a finished cell; and the table."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..data.jsonl import read_json, write_json
from ..data.tasks import get_task
from ..errors import InputError, last_line
from ..models import resolve_model
from ..training.recipes import load_recipe
from . import paper
from .table import build_table, write_table


class CellFailedError(RuntimeError):
    """A training or evaluation subprocess of a cell exited with an error (its log names why)."""


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
        argv = ["-m", "rlce_trl.cli", "coevolve", "--method", load_recipe(plan["recipes"][method]).coevolve_method,
                "--config", recipe, "--output_dir", str(out), "--seed", str(seed),
                "--train_file", args.train_file, "--validation_file", args.validation_file]
        argv += ["--media_root", args.media_root] if args.media_root else []
        if plan["launcher"] != [sys.executable]:
            argv += ["--coevolve_launcher", shlex.join(plan["launcher"])]
        return argv + _judge_flags(args) + plan["overrides"]
    steps, patience = paper.validation_schedule(method, plan["recipe_task"])
    steps = steps or paper.BASELINE_VALIDATION_STEPS  # a method the paper does not list
    argv = ["-m", "rlce_trl.cli", "train", "--config", recipe, "--seed", str(seed), "--output_dir", str(out)]
    if plan["selection"] == "checkpoints":  # validated afterwards, checkpoint by checkpoint
        argv += ["--save_strategy", "steps", "--save_steps", str(args.validation_steps or steps)]
    else:
        argv += ["--validation_steps", str(args.validation_steps or steps)]
        argv += ["--validation_patience", str(patience)] if patience else []
        argv += ["--validation_limit", str(args.validation_limit)] if args.validation_limit else []
    if plan["task_file"]:
        argv += ["--task", plan["task_file"]]
    elif get_task(plan["task"]).forms:  # a prepared folder of the task's forms, or the sample
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
    if plan["task_file"]:
        argv += ["--task", plan["task_file"], "--split", split]
    elif get_task(plan["task"]).forms:
        argv += ["--data", args.data, "--split", split]
        argv += ["--prefeval_dir", args.prefeval_dir] if args.prefeval_dir else []
    else:
        data = args.test_file if split == "test" else args.validation_file
        argv += ["--data", data, "--hba_task", plan["task"], "--media_root", args.media_root]
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
        raise CellFailedError(f"{what} failed (exit {code}): {last_line(log) or 'no output'} (log: {log})")
    return wall


def _score(summary_path: Path) -> float | None:
    summary = read_json(summary_path) or {}
    return summary.get("score", summary.get("prefeval_macro"))


def _select_checkpoints(args, plan: dict, method: str, seed: int, train_dir: Path) -> tuple[str, dict]:
    """Validate a finished run's checkpoints in step order (then its final model) with `rlce-trl evaluate` and keep
    the best, stopping after `patience` validations without improvement as early stopping would have."""
    candidates = sorted((int(p.name.split("-")[1]), str(p)) for p in train_dir.glob("checkpoint-*")
                        if p.name.split("-")[1].isdigit() and (p / "config.json").is_file())
    if (train_dir / "config.json").is_file():
        candidates.append(("final", str(train_dir)))
    if not candidates:
        raise CellFailedError(f"{method} seed {seed}: no checkpoint in {train_dir} to validate (the run saved none: "
                              "check save_strategy in the overrides).")
    _, patience = paper.validation_schedule(method, plan["recipe_task"])
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
        state = read_json(train_dir / "state.json") or {}
        best = state.get("best")
        if not best:
            raise CellFailedError(f"{method}: the co-evolution run in {train_dir} has no validated round (state.json "
                                  "'best' is empty): check its validation_file and log.")
        return best["checkpoint"], {"best_round": best["round"], "best_validation": best["score"]}
    best = train_dir / "best"
    record = read_json(train_dir / "best.json") or {}
    if not (best / "config.json").is_file():
        raise CellFailedError(f"{method}: no best checkpoint in {best}: validation never ran (the run ended before "
                              f"its first validation): delete {train_dir.parent} and rerun with a lower "
                              "--validation_steps.")
    return str(best), {"best_step": record.get("best_step"), "best_validation": record.get("best_score"),
                       "stopped_early": record.get("stopped_early")}


def _device_hours(plan: dict, method: str, train_dir: Path, wall: float) -> float:
    if plan["kinds"][method] == "coevolve":  # the driver accounts every phase's devices itself
        state = read_json(train_dir / "state.json") or {}
        return sum(step.get("device_hours", 0.0) for step in state.get("steps", []))
    return wall * plan["devices"] / 3600


def run_cell(args, plan: dict, method: str, seed: int, log=print) -> dict:
    """Train (unless `train.json` says it is done) and evaluate (unless `done.json` does) one cell."""
    here = cell_dir(plan, method, seed)
    done = read_json(here / "done.json")
    if done is not None:
        return done
    train_args = train_arguments(args, plan, method, seed)
    trained = read_json(here / "train.json")
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
        write_json(trained, here / "train.json")  # trained: a rerun from here on selects and tests only
    if trained.get("checkpoint") is None:
        if plan["kinds"][method] == "train" and plan["selection"] == "checkpoints":
            log(f"[{method} seed {seed}] validating the checkpoints")
            checkpoint, selection = _select_checkpoints(args, plan, method, seed, train_dir)
            trained["device_hours"] += selection["validation_wall_s"] / 3600  # one device
        else:
            checkpoint, selection = _best_checkpoint(plan, method, train_dir)
        trained = {**trained, "checkpoint": checkpoint, **selection}
        write_json(trained, here / "train.json")
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
    write_json(record, here / "done.json")
    return record


def run_base(args, plan: dict, log=print) -> dict:
    """Evaluate the base model once (`base/done.json`)."""
    here = cell_dir(plan, "base", None)
    done = read_json(here / "done.json")
    if done is not None:
        return done
    model = resolve_model(plan["model"])  # an offline alias: the folder it converts to
    log(f"[base] test evaluation of {model}")
    wall = _run(eval_arguments(args, plan, model, here / "test"), here / "eval.log", "base model: test evaluation")
    record = {"method": "base", "model": plan["model"], "score": _score(here / "test" / "summary.json"),
              "eval_wall_s": round(wall, 3)}
    write_json(record, here / "done.json")
    return record


def write(plan: dict) -> dict:
    """The table of the finished cells (`done.json`) and the base record, written."""
    done = {(m, s): read_json(cell_dir(plan, m, s) / "done.json") for m in plan["methods"] for s in plan["seeds"]}
    cells = {cell: record for cell, record in done.items() if record is not None}
    base = read_json(cell_dir(plan, "base", None) / "done.json")
    table = build_table(plan["task"], plan["model"], plan["methods"], plan["seeds"], cells, base)
    write_table(table, plan["output_dir"])
    return table
