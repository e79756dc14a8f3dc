"""Best-on-validation checkpoint selection (appendix A, "Checkpoint selection").

Every method is selected the same way: validate every N optimizer steps with the task's metric, keep the checkpoint
with the best validation score (that one is evaluated on the test split), and stop when the score has not improved
for `patience` validations. Validation labels are used for this selection only, never for rewards.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from transformers import TrainerCallback

from ..data.jsonl import write_json
from ..generation.generators import TransformersGenerator, VisionLanguageGenerator
from .evaluate import evaluate_rows
from .lockstep import _broadcast, _world, generation_is_collective, run_on_main

#: `validate(model, processing_class, step) -> score` (higher is better unless told otherwise).
ValidateFn = Callable[[object, object, int], float]


def evaluate_model(rows: Sequence[dict], model, processing_class, output_dir: str | Path, judge=None,
                   max_new_tokens: int = 512, batch_size: int = 8, media_root: str | Path | None = None) -> dict:
    """Greedy generation with the model being trained on `rows` (with `gold`), scored like `rlce-trl evaluate` into
    `output_dir`; returns the summary. Rows with `videos` (HBA) read their clips from `media_root` and are generated
    by the vision-language policy with its processor (the trainer's `processing_class`)."""
    backend = VisionLanguageGenerator if any(r.get("videos") for r in rows) else TransformersGenerator
    generate = backend(model, processing_class, max_new_tokens=max_new_tokens, batch_size=batch_size)
    return evaluate_rows(rows, generate, output_dir, judge=judge, batch_size=batch_size, progress=False,
                         media_root=media_root)


def make_validation_fn(rows: Sequence[dict], output_dir: str | Path, judge=None, max_new_tokens: int = 512,
                       batch_size: int = 8, media_root: str | Path | None = None) -> ValidateFn:
    """A validation function for [`BestCheckpointCallback`]: [`evaluate_model`] on validation `rows`; each
    validation's rows and summary go to `output_dir/step-<N>/`."""
    if media_root is None and any(r.get("videos") for r in rows):
        raise ValueError("The validation rows hold videos: pass media_root (the folder their paths are relative to).")

    def validate(model, processing_class, step: int) -> float:
        summary = evaluate_model(rows, model, processing_class, Path(output_dir) / f"step-{step}", judge,
                                 max_new_tokens, batch_size, media_root)
        if summary["score"] is None:
            raise RuntimeError(f"Validation produced no score ({summary.get('note', 'no rows judged')}).")
        return summary["score"]

    return validate


class BestCheckpointCallback(TrainerCallback):
    """Validate every `eval_steps` optimizer steps, keep the best checkpoint, stop early.

    Args:
        validate: `validate(model, processing_class, step) -> score`, e.g. from [`make_validation_fn`].
        eval_steps: validate when `global_step` is a multiple of this (the paper: every second RLCE training cycle,
            every twelve optimizer steps for the rubric and self-consistency baselines).
        best_dir: where the best checkpoint is saved (default `<output_dir>/best`), with `best.json` beside it.
        greater_is_better: direction of the metric.
        patience: stop after this many validations without improvement; `None` never stops.
        validate_at_end: also validate after the last step when it is not a multiple of `eval_steps`.

    Validation runs on the main process; with several processes the score (and the stop decision) is broadcast. Under
    ZeRO-3 (or FSDP) with several processes every process repeats the main process's `generate` calls
    ([`~rlce_trl.evaluation.lockstep.run_on_main`]), and the best checkpoint is saved by the trainer (`save_model`,
    which gathers the sharded weights on every process): [`RLCEGRPOTrainer`] binds its callbacks; with another trainer
    call `callback.bind_trainer(trainer)`.
    """

    def __init__(self, validate: ValidateFn, eval_steps: int, best_dir: str | Path | None = None,
                 greater_is_better: bool = True, patience: int | None = None, validate_at_end: bool = True):
        if eval_steps < 1:
            raise ValueError("eval_steps must be at least 1.")
        self.validate, self.eval_steps, self.best_dir = validate, eval_steps, best_dir
        self.greater_is_better, self.patience, self.validate_at_end = greater_is_better, patience, validate_at_end
        self.best_score: float | None = None
        self.best_step: int | None = None
        self.history: list[dict] = []
        self.bad_validations = 0
        self.trainer = None

    def bind_trainer(self, trainer) -> None:
        """Save the best checkpoint through `trainer.save_model` (complete weights under ZeRO-3 / FSDP)."""
        self.trainer = trainer

    def _run(self, args, state, control, model, processing_class):
        if any(h["step"] == state.global_step for h in self.history):
            return control
        score = run_on_main(model, lambda: self.validate(model, processing_class, state.global_step))
        if _world()[1] > 1:  # the main process's score (and stop decision) on every process
            score = _broadcast(score)
        best_dir = Path(self.best_dir or Path(args.output_dir) / "best")
        improved = self.best_score is None or (
            score > self.best_score if self.greater_is_better else score < self.best_score)
        self.history.append({"step": state.global_step, "score": score, "best": improved})
        if improved:
            self.best_score, self.best_step, self.bad_validations = score, state.global_step, 0
            if state.is_world_process_zero and best_dir.exists():
                shutil.rmtree(best_dir)
            if self.trainer is not None:  # every process: gathers sharded weights (ZeRO-3, FSDP) to the main one
                self.trainer.save_model(str(best_dir), _internal_call=True)  # internal: no push to the Hub
            elif state.is_world_process_zero:  # unsharded (checked at on_train_begin)
                model.save_pretrained(best_dir)
                if processing_class is not None:
                    processing_class.save_pretrained(best_dir)
        else:
            self.bad_validations += 1
            if self.patience is not None and self.bad_validations >= self.patience:
                control.should_training_stop = True
        if state.is_world_process_zero:
            best_dir.parent.mkdir(parents=True, exist_ok=True)
            record = {"best_step": self.best_step, "best_score": self.best_score, "history": self.history,
                      "stopped_early": bool(control.should_training_stop and not improved)}
            write_json(record, best_dir.parent / "best.json")
        state.log_history.append({"step": state.global_step, "validation_score": score,
                                  "best_validation_score": self.best_score})
        return control

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.trainer is None and model is not None and generation_is_collective(model):  # before any step
            raise RuntimeError("BestCheckpointCallback under ZeRO-3 / FSDP with several processes saves through the "
                               "trainer: call callback.bind_trainer(trainer) after building the trainer "
                               "(RLCEGRPOTrainer does).")
        return control

    def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        if state.global_step % self.eval_steps == 0:
            return self._run(args, state, control, model, processing_class)
        return control

    def on_train_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        # `should_training_stop` is also set when max_steps is reached, so it cannot tell an early stop apart here
        if self.validate_at_end and state.global_step % self.eval_steps != 0 and self.bad_validations != self.patience:
            self._run(args, state, control, model, processing_class)
        return control
