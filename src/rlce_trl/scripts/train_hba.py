# Copyright the rlce-trl developers. Licensed under the Apache License, Version 2.0.
"""
RLCE on the Human Behavior Atlas video tasks (sentiment, humour, intent; `rlce_trl.data.tasks`): TRL's GRPO script
with `RLCEGRPOTrainer` in place of `GRPOTrainer`.

    accelerate launch --config_file configs/accelerate/zero3.yaml examples/train_hba.py \
        --config configs/<task>_rlce.yaml --train_file /path/to/<task>/train.jsonl --media_root /path/to/media
    # installed package: accelerate launch ... -m rlce_trl.cli train --config <task>_rlce --train_file ...

Rows come from HBA's JSONL splits through `rlce_trl.data.hba`, each `<video>` decoded into frames when a row is read
(`video_fps`, `video_min_frames`..`video_max_frames`, `video_frame_height` x `video_frame_width`). The policy is then a
vision-language model whose processor takes video (the paper: Qwen3.5-9B): with `video_input: video` (the default) the
clip reaches generation, every log-probability forward of the loss and the frozen verifier (`rlce_trl.trainer_video`).
`--text_only` (or `video_input: text`) drops the videos and keeps the text (transcript and question), for a text-only
policy or a smoke test. Missing or empty clips stop the run before training, naming them. Train rows never carry the
gold answer: RLCE uses no labels.
"""

from dataclasses import dataclass, field

from trl import ModelConfig

from rlce_trl.config import RLCEGRPOConfig
from rlce_trl.data.hba import load_hba_split
from rlce_trl.data.tasks import get_task, video_tasks
from rlce_trl.errors import InputError
from rlce_trl.scripts import run_script
from rlce_trl.training.arguments import RecipeParser, RLCEScriptArguments
from rlce_trl.training.pipeline import TaskRows, task_file_rows, text_only, train

#: The HBA tasks this script trains on: the task registry's video tasks (`rlce_trl.data.tasks`).
DATASETS = video_tasks()


@dataclass
class HBAScriptArguments(RLCEScriptArguments):
    """
    Args:
        hba_task (`str`, *optional*):
            One of the Human Behavior Atlas tasks (`rlce_trl.data.tasks.video_tasks()`; the first by default).
        train_file (`str`, *optional*):
            The task's training split (HBA JSONL).
        validation_file (`str`, *optional*):
            The task's validation split (HBA JSONL), for `validation_steps`.
        media_root (`str`, *optional*):
            Folder the `videos` paths are relative to.
        text_only (`bool`, *optional*, defaults to `False`):
            Drop the videos and train on the text alone.
    """

    hba_task: str = field(default=DATASETS[0], metadata={"help": "HBA task.", "choices": list(DATASETS)})
    train_file: str | None = field(default=None, metadata={"help": "Training split (HBA JSONL)."})
    validation_file: str | None = field(default=None, metadata={"help": "Validation split (HBA JSONL)."})
    media_root: str | None = field(default=None, metadata={"help": "Folder the clip paths are relative to."})
    text_only: bool = field(default=False, metadata={"help": "Drop the videos; train on the text alone."})


def load_rows(script_args) -> TaskRows:
    """The task's HBA rows (`--train_file`, `--validation_file`): video prompts, or text alone with `text_only`;
    with `tta_split`, `--train_file` is the split to adapt on, read with its gold."""
    if not script_args.train_file:
        raise InputError("Pass --train_file (the task's HBA training split, JSONL).")
    if not (script_args.text_only or script_args.media_root):
        raise InputError("Pass --media_root (the folder the clip paths are relative to), or --text_only.")
    train_rows = load_hba_split(script_args.train_file, script_args.hba_task, script_args.tta_split or "train")
    validation_rows = (load_hba_split(script_args.validation_file, script_args.hba_task, "validation")
                       if script_args.validation_file else [])
    if script_args.text_only:
        train_rows, validation_rows = text_only(train_rows), text_only(validation_rows)
    task = get_task(script_args.hba_task)
    return TaskRows(train=train_rows, validation=validation_rows, free_text=task.needs_judge,
                    description=f"{task.display_name} (Human Behavior Atlas){', text only' * script_args.text_only}",
                    media_root=None if script_args.text_only else script_args.media_root)


def main(script_args, training_args, model_args):
    if training_args.video_input == "text":
        script_args.text_only = True
    rows = task_file_rows(script_args) if script_args.task else load_rows(script_args)
    return train(script_args, training_args, model_args, rows)


def make_parser():
    return RecipeParser((HBAScriptArguments, RLCEGRPOConfig, ModelConfig))


if __name__ == "__main__":
    run_script(make_parser, main)
