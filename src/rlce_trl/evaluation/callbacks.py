"""Best-on-validation checkpoint selection (appendix A, "Checkpoint selection").

Every method is selected the same way: validate every N optimizer steps with the task's metric, keep the checkpoint
with the best validation score (that one is evaluated on the test split), and stop when the score has not improved
for `patience` validations. Validation labels are used for this selection only, never for rewards.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from transformers import TrainerCallback

from .evaluate import evaluate_rows
from .generation import TransformersGenerator

#: `validate(model, processing_class, step) -> score` (higher is better unless told otherwise).
ValidateFn = Callable[[object, object, int], float]


def make_validation_fn(
    rows: Sequence[dict],
    output_dir: str | Path,
    judge=None,
    max_new_tokens: int = 512,
    batch_size: int = 8,
) -> ValidateFn:
    """A validation function for [`BestCheckpointCallback`]: greedy generation with the model being trained on
    validation `rows` (with `gold`), scored like `rlce-trl evaluate`; each validation's rows and summary go to
    `output_dir/step-<N>/`."""

    def validate(model, processing_class, step: int) -> float:
        generate = TransformersGenerator(model, processing_class, max_new_tokens=max_new_tokens, batch_size=batch_size)
        summary = evaluate_rows(
            rows, generate, Path(output_dir) / f"step-{step}", judge=judge, batch_size=batch_size, progress=False
        )
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

    Validation runs on the main process; with several processes the score (and the stop decision) is broadcast, and
    the model must be generatable on one process (not sharded with ZeRO-3).
    """

    def __init__(
        self,
        validate: ValidateFn,
        eval_steps: int,
        best_dir: str | Path | None = None,
        greater_is_better: bool = True,
        patience: int | None = None,
        validate_at_end: bool = True,
    ):
        if eval_steps < 1:
            raise ValueError("eval_steps must be at least 1.")
        self.validate, self.eval_steps, self.best_dir = validate, eval_steps, best_dir
        self.greater_is_better, self.patience, self.validate_at_end = greater_is_better, patience, validate_at_end
        self.best_score: float | None = None
        self.best_step: int | None = None
        self.history: list[dict] = []
        self.bad_validations = 0

    def _is_better(self, score: float) -> bool:
        if self.best_score is None:
            return True
        return score > self.best_score if self.greater_is_better else score < self.best_score

    def _shared_score(self, args, state, model, processing_class) -> float:
        score = self.validate(model, processing_class, state.global_step) if state.is_world_process_zero else None
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and args.world_size > 1:
            box = [score]
            dist.broadcast_object_list(box, src=0)
            score = box[0]
        return score

    def _run(self, args, state, control, model, processing_class):
        if any(h["step"] == state.global_step for h in self.history):
            return control
        score = self._shared_score(args, state, model, processing_class)
        best_dir = Path(self.best_dir or Path(args.output_dir) / "best")
        improved = self._is_better(score)
        self.history.append({"step": state.global_step, "score": score, "best": improved})
        if improved:
            self.best_score, self.best_step, self.bad_validations = score, state.global_step, 0
            if state.is_world_process_zero:
                if best_dir.exists():
                    shutil.rmtree(best_dir)
                model.save_pretrained(best_dir)
                if processing_class is not None:
                    processing_class.save_pretrained(best_dir)
        else:
            self.bad_validations += 1
            if self.patience is not None and self.bad_validations >= self.patience:
                control.should_training_stop = True
        if state.is_world_process_zero:
            best_dir.parent.mkdir(parents=True, exist_ok=True)
            record = {
                "best_step": self.best_step,
                "best_score": self.best_score,
                "history": self.history,
                "stopped_early": bool(control.should_training_stop and not improved),
            }
            (best_dir.parent / "best.json").write_text(json.dumps(record, indent=2))
        state.log_history.append(
            {"step": state.global_step, "validation_score": score, "best_validation_score": self.best_score}
        )
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
