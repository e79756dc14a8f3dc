"""One step of a co-evolution run, in its own process: `python -m rlce_trl.coevolution.phase --job job.json`.

The driver writes `job.json` (kind, phase, recipe, checkpoints, files); this module runs it and writes `report.json`
beside it when it finished (the driver's proof):

- `train`: one run of the training pipeline (`rlce_trl.training.pipeline.train`, as every training script) from the
  role's checkpoint on the phase's data, with the phase's reward method, `max_steps` and overrides, the frozen initial
  model as verifier and the partner role's checkpoint as `partner_model_name_or_path`; its output folder is
  `<step>/model` (the model, its card, the run report).
- `build`: the method's data builder (RLAC: the harvest with the new generator).
- `validate`: the validated role's checkpoint on the validation rows with `make_validation_fn` (greedy, the
  evaluation protocol; free-text rows need the recipe's judge).

A co-evolution recipe is an ordinary recipe (`RLCEGRPOConfig` + `trl.ModelConfig` keys) plus the
[`CoevolveArguments`] below; [`make_parser`] parses it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trl import ModelConfig

from ..config import RLCEGRPOConfig, json_problems
from ..data.jsonl import read_jsonl, write_json
from ..errors import InputError
from ..training.arguments import RecipeParser, RLCEScriptArguments
from .base import BuildContext, PhaseSpec
from .registry import get_method

logger = logging.getLogger(__name__)

#: Script arguments co-evolution inherits but never reads (its files are its own; it validates every round and stops
#: early by `coevolve_patience`): refused when set, not ignored.
UNUSED_ARGUMENTS = ("task", "tta_split", "tta_eval_base", "validation_steps", "validation_patience")
#: Training arguments a phase must not act on, and why (refused when set).
REFUSED_TRAINING = {
    "push_to_hub": "a phase's model is one step of the run; push the result (summary.json's result_checkpoint)",
    "resume_from_checkpoint": "pass --resume to continue a co-evolution run (each step reruns from its start)",
}


@dataclass
class CoevolveArguments(RLCEScriptArguments):
    """
    Args:
        coevolve_method (`str`, *optional*):
            The method the recipe is written for (`rlac`, `visplay`, `video_zero`); `--method` must match it.
        coevolve_rounds (`int`, *optional*, defaults to `5`):
            Rounds (RLAC: 5; VisPlay: 3 iterations; Video-Zero: at most 5).
        coevolve_phase_steps (`dict`, *optional*):
            Optimizer steps per phase, e.g. `{"generator": 18, "critic": 18}` (Table 15).
        coevolve_phase_overrides (`dict`, *optional*):
            Config keys for one phase only, e.g. `{"critic": {"max_completion_length": 1024}}`.
        coevolve_corpus_size (`int`, *optional*):
            Clips drawn once from the training split (seeded) and reused every round (the paper: 600); all by default.
        rlac_max_pairs (`int`, *optional*, defaults to `600`):
            RLAC's pair cap M: one harvested pair per clip, at most this many.
        coevolve_build_kwargs (`dict`, *optional*):
            Options of the data builder between the phases of VisPlay / Video-Zero (`build_reasoner_rows` /
            `build_solver_rows`), e.g. `{"n_candidates": 8, "m": 9, "n_clips": 1000, "cap": 600}`.
        coevolve_patience (`int`, *optional*):
            Stop early when this many validations in a row did not improve on the best (Video-Zero: 2); unset: run
            every round.
        coevolve_launcher (`str`, *optional*):
            Command that starts a train phase's process instead of this Python, e.g. `"accelerate launch
            --config_file configs/accelerate/multi_gpu.yaml"` (several GPUs).
        train_file / validation_file (`str`, *optional*):
            The corpus (GRPO-ready JSONL, or an HBA split with `hba_task`) and the validation rows (with gold).
        media_root (`str`, *optional*):
            The folder HBA clip paths are relative to.
        hba_task (`str`, *optional*):
            The HBA task of the files (one of `rlce_trl.data.tasks.video_tasks()`); unset for PrefEval.
    """

    coevolve_method: str | None = field(default=None, metadata={"help": "rlac, visplay or video_zero."})
    coevolve_rounds: int = field(default=5, metadata={"help": "Rounds of the co-evolution."})
    coevolve_phase_steps: dict[str, Any] | str | None = field(
        default=None, metadata={"help": "Optimizer steps per phase, a JSON object ({\"generator\": 18, ...})."})
    coevolve_phase_overrides: dict[str, Any] | str | None = field(
        default=None, metadata={"help": "Config keys per phase, a JSON object ({\"critic\": {...}})."})
    coevolve_corpus_size: int | None = field(default=None, metadata={"help": "Clips drawn once (seeded); None: all."})
    rlac_max_pairs: int = field(default=600, metadata={"help": "RLAC's pair cap M (one pair per clip)."})
    coevolve_build_kwargs: dict[str, Any] | str | None = field(
        default=None, metadata={"help": "Options of the data builder between phases, a JSON object."})
    coevolve_patience: int | None = field(
        default=None, metadata={"help": "Stop after this many validations without improvement; None: never."})
    coevolve_launcher: str | None = field(
        default=None, metadata={"help": "Launcher of train phases, e.g. 'accelerate launch --config_file x.yaml'."})
    train_file: str | None = field(default=None, metadata={"help": "The corpus (JSONL)."})
    validation_file: str | None = field(default=None, metadata={"help": "Validation rows with gold (JSONL)."})
    media_root: str | None = field(default=None, metadata={"help": "Folder of the HBA clips."})
    hba_task: str | None = field(default=None, metadata={"help": "HBA task of the files; unset for PrefEval."})

    def __post_init__(self):
        for name in UNUSED_ARGUMENTS:
            if getattr(self, name) != self.__dataclass_fields__[name].default:
                raise ValueError(f"co-evolution does not use {name}: drop it (a co-evolution run takes its rows from "
                                 "its own files and validates every round).")
        for name in ("coevolve_phase_steps", "coevolve_phase_overrides", "coevolve_build_kwargs"):
            if problems := json_problems(self, name):
                raise ValueError(problems[0])
            value = getattr(self, name)
            if value is not None and not isinstance(value, dict):
                raise ValueError(f"{name} must be a mapping (a JSON object), got {value!r}.")
        if self.coevolve_rounds < 1:
            raise ValueError(f"coevolve_rounds={self.coevolve_rounds}: set it to 1 or more.")
        if self.rlac_max_pairs < 1:
            raise ValueError(f"rlac_max_pairs={self.rlac_max_pairs}: set it to 1 or more (the paper: 600).")
        if self.coevolve_patience is not None and self.coevolve_patience < 1:
            raise ValueError(f"coevolve_patience={self.coevolve_patience}: set it to 1 or more, or leave it unset.")

    def settings(self) -> dict:
        """The values the methods read (`phases`, `build_data`)."""
        return {"phase_steps": self.coevolve_phase_steps or {}, "phase_overrides": self.coevolve_phase_overrides or {},
                "corpus_size": self.coevolve_corpus_size, "max_pairs": self.rlac_max_pairs, "hba_task": self.hba_task,
                "media_root": self.media_root, "build_kwargs": self.coevolve_build_kwargs or {},
                "patience": self.coevolve_patience}


class CoevolveParser(RecipeParser):
    """The training scripts' recipe parser (one-line errors naming the flag or the recipe key) that refuses the
    training arguments of [`REFUSED_TRAINING`]."""

    def parse_args_into_dataclasses(self, *args, **kwargs):
        parsed = super().parse_args_into_dataclasses(*args, **kwargs)
        for name, why in REFUSED_TRAINING.items():
            if getattr(parsed[1], name):
                raise ValueError(f"co-evolution does not use {name}: drop it ({why}).")
        return parsed


def make_parser():
    return CoevolveParser((CoevolveArguments, RLCEGRPOConfig, ModelConfig))


def _as_arg(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def phase_argv(job: dict) -> list[str]:
    """The recipe's argument list for a train job: the recipe, the job's files and checkpoints, the phase's reward,
    steps and overrides, then the run's own overrides (they win)."""
    phase = job["phase"]
    out = Path(job["output_dir"]) / "model"
    argv = ["--config", job["recipe"], "--model_name_or_path", job["start_model"], "--output_dir", str(out),
            "--reward_method", phase["reward_method"], "--max_steps", str(phase["max_steps"]),
            "--save_strategy", "no", "--seed", str(job["seed"] + job["round"])]
    if job["start_model"] != job["base_model"]:  # the validator stays the frozen initial model
        argv += ["--verifier_model_name_or_path", job["base_model"]]
    if job.get("partner"):
        argv += ["--partner_model_name_or_path", job["partner"]]
    for key, value in phase.get("overrides", {}).items():
        argv += [f"--{key}", _as_arg(value)]
    return argv + list(job.get("extra_args", []))


def without_backend(overrides: list[str]) -> list[str]:
    """The overrides without `--ddp_backend`, for the processes that train nothing (the driver, build and validate
    steps): a distributed backend is for the launched train phases; parsed in a single process it makes accelerate
    look for a process group nobody started."""
    return [word for k, word in enumerate(overrides) if word.split("=", 1)[0] != "--ddp_backend"
            and (k == 0 or overrides[k - 1] != "--ddp_backend")]


def parse_job_args(job: dict, argv: list[str] | None = None):
    """`(script_args, training_args, model_args)` of a job (a train job's full argument list, or the recipe with
    the run's overrides for build and validate jobs, which run in one process: [`without_backend`])."""
    if argv is None:
        argv = ["--config", job["recipe"], "--output_dir", job["output_dir"],
                *without_backend(job.get("extra_args", []))]
    return make_parser().parse_args_and_config(argv)


def _gpus() -> int:
    import torch

    return int(os.environ.get("WORLD_SIZE", "1")) if torch.cuda.is_available() else 0


def run_train(job: dict) -> dict:
    """The phase's rows through the one training pipeline ([`~rlce_trl.training.pipeline.train`]): prompt suffix and
    method prompts, length filter, one full batch at least, gold check, quantization and PEFT, model card and report,
    all in `<step>/model`. No validation split (the driver validates after the round) and no push to the Hub."""
    from ..training.pipeline import TaskRows, text_only, train

    argv = phase_argv(job)
    script_args, training_args, model_args = parse_job_args(job, argv)
    rows = read_jsonl(job["data_file"])
    video = any(r.get("videos") for r in rows)
    if video and training_args.video_input == "text":
        rows, video = text_only(rows), False
    if video and not script_args.media_root:
        raise InputError("The phase's rows carry clips: pass --media_root (the folder the clip paths are under).")
    name = f"{job['method']} co-evolution: {job['phase']['name']} phase, round {job['round']}"
    task = TaskRows(train=rows, validation=[], description=name, free_text=False, fill_batch=True,
                    media_root=script_args.media_root if video else None)
    trainer = train(script_args, training_args, model_args, task)
    if not trainer.accelerator.is_main_process:
        return {}
    last = trainer.state.log_history[-1] if trainer.state.log_history else {}
    info = trainer.rlce_card_info
    return {"checkpoint": training_args.output_dir, "global_step": trainer.state.global_step, "rows": info["rows"],
            "rows_repeated": info["rows_repeated"],
            "metrics": {k: v for k, v in last.items() if isinstance(v, (int, float))}}


def run_build(job: dict) -> dict:
    from transformers import set_seed

    args = parse_job_args(job)
    set_seed(job["seed"] + job["round"])  # the frozen models sample: a rerun (after --resume) builds the same data
    method = get_method(job["method"], args[0].settings())
    ctx = BuildContext(job["round"], PhaseSpec(**job["phase"]), job["checkpoints"], job["base_model"],
                       job["train_file"], job["data_file"], args, job["seed"], job.get("data", {}))
    return method.build_data(ctx)


def run_validate(job: dict) -> dict:
    from ..evaluation.callbacks import make_validation_fn
    from ..generation.generators import make_generator
    from ..training.pipeline import make_judge
    from .corpus import load_validation

    script_args, _, _ = parse_job_args(job)
    rows = load_validation(job["validation_file"], script_args.hba_task)[: script_args.validation_limit or None]
    video = any(r.get("videos") for r in rows)
    judge = None if any(r.get("answer_options") for r in rows) else make_judge(script_args, rows)
    generator = make_generator(job["model"], "transformers", video=video,
                               max_new_tokens=script_args.validation_max_new_tokens)
    processing = getattr(generator, "processor", None) or generator.tokenizer
    validate = make_validation_fn(rows, Path(job["output_dir"]) / "validation", judge=judge,
                                  max_new_tokens=script_args.validation_max_new_tokens,
                                  media_root=script_args.media_root if video else None)
    return {"score": validate(generator.model, processing, job["round"]), "rows": len(rows)}


RUNNERS = {"train": run_train, "build": run_build, "validate": run_validate}


def main(argv: list[str] | None = None) -> int:
    from .driver import REPORT_FILE

    parser = argparse.ArgumentParser(description="Run one step of a co-evolution (written by rlce-trl coevolve).")
    parser.add_argument("--job", required=True, help="The step's job.json.")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stdout)
    start = time.monotonic()
    job = json.loads(Path(args.job).read_text())
    result = RUNNERS[job["kind"]](job)
    if int(os.environ.get("RANK", "0")) == 0:
        gpus = _gpus() if job["kind"] == "train" else (1 if _gpus() else 0)
        report = {"ok": True, "gpus": gpus, "result": result, "wall_s": round(time.monotonic() - start, 3)}
        write_json(report, Path(job["output_dir"]) / REPORT_FILE)  # written atomically: the driver's proof
    return 0


if __name__ == "__main__":
    sys.exit(main())
