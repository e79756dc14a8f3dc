"""Ctrl-C during training tells the truth: the checkpoint of the last finished step is saved (with the trainer state
that resuming needs), `<output_dir>/rlce_interrupted.json` names it, and the next `train()` in the same output folder
resumes from it unless told otherwise (`resume_from_checkpoint`), so rerunning the same command goes on at the next
step. Before the first step has finished nothing is saved, and the error says so
([`~rlce_trl.errors.TrainingInterrupted`])."""

from __future__ import annotations

import logging
import os

from .data.jsonl import read_json, write_json
from .errors import _INTERRUPTS, TrainingInterrupted

logger = logging.getLogger(__name__)

MARKER = "rlce_interrupted.json"


def _saved_checkpoint(trainer, may_save: bool, after: str) -> str | None:
    """The last finished step's checkpoint, saved first if `may_save` and missing; `None` when there is none."""
    step = trainer.state.global_step
    folder = os.path.join(trainer.args.output_dir, f"checkpoint-{step}")
    if step > 0 and not os.path.isdir(folder) and may_save:
        try:
            trainer._save_checkpoint(trainer.model, trial=None)
        except Exception as error:  # noqa: BLE001 -- the error that stopped training is the one to report
            logger.warning("Could not save a checkpoint after %s: %s", after, error)
    return folder if step > 0 and os.path.isfile(os.path.join(folder, "trainer_state.json")) else None


def save_interrupted(trainer) -> TrainingInterrupted:
    """Save what can be saved after a Ctrl-C and return the error that says where. A single process saves the
    checkpoint of the last finished step (the weights of an interrupted step are not yet updated: the optimizer
    step closes it); with several processes only an existing checkpoint of that step is named (saving is a collective
    a lone interrupted rank could hang in)."""
    _INTERRUPTS.clear()  # this Ctrl-C is handled here
    args, step = trainer.args, trainer.state.global_step
    folder = _saved_checkpoint(trainer, trainer.accelerator.num_processes == 1, "Ctrl-C")
    if folder is not None and trainer.is_world_process_zero():
        trainer.state.save_to_json(os.path.join(args.output_dir, "trainer_state.json"))  # the report's curves
        write_json({"checkpoint": folder, "step": step}, os.path.join(args.output_dir, MARKER))
    return TrainingInterrupted(folder, step, args.output_dir)


def save_after_verifier_failure(trainer) -> str | None:
    """The verifier failed for good on some process and every process raised together in the gather of
    `_calculate_rewards` (`error.every_process`), so all are here at once and the collective save of a sharded model
    cannot hang: save the checkpoint of the last finished step unless `save_steps` already did, and return it."""
    folder = _saved_checkpoint(trainer, True, "the verifier failed")
    if folder is not None:
        logger.error("The verifier failed for good; the checkpoint of step %d is %s: fix the verifier and resume from "
                     "it (resume_from_checkpoint).", trainer.state.global_step, folder)
    return folder


def interrupted_checkpoint(output_dir: str, resume_from_checkpoint):
    """`resume_from_checkpoint`, or, when it is unset (`None`) and the last run in `output_dir` was interrupted, the
    checkpoint that run saved."""
    marker = read_json(os.path.join(output_dir, MARKER)) if resume_from_checkpoint is None else None
    folder = (marker or {}).get("checkpoint")
    if not isinstance(folder, str) or not os.path.isdir(folder):
        return resume_from_checkpoint
    logger.warning("Resuming the interrupted run from %s (step %s).", folder, int(marker.get("step", 0)) + 1)
    return folder


def clear_interrupted(output_dir: str) -> None:
    """The run finished: the next one in this folder starts afresh."""
    path = os.path.join(output_dir, MARKER)
    if os.path.isfile(path):
        os.remove(path)
