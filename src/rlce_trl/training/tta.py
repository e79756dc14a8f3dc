"""Test-time adaptation (paper §4.2 and appendix B.3, following TTRL's protocol): the base model adapts directly on
the unlabelled rows of a split (usually `test`), for a budget of passes over it, and is evaluated at the end of each
pass on the same split with its gold answers.

- the policy adapts on the rows without their gold answer ([`rlce_trl.data.checks.adaptation_rows`]);
- [`PassEvaluationCallback`] evaluates at the end of every pass (and, with `tta_eval_base`, the base model before the
  first), writing `<output_dir>/tta/pass-<k>/{predictions.jsonl,summary.json}` and `<output_dir>/tta/passes.json`,
  which `rlce-trl analyze --ttt` puts side by side ([`rlce_trl.analysis.ttt`]).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from transformers import TrainerCallback

from ..data.jsonl import write_json


class PassEvaluationCallback(TrainerCallback):
    """Evaluate the policy on `rows` (with `gold`) at the end of every pass over the adaptation split.

    Args:
        rows: the evaluation rows (the adaptation split with its gold).
        output_dir: where `pass-<k>/` and `passes.json` go (e.g. `<output_dir>/tta`).
        judge: `judge(task, records)` for free-text rows (PrefEval, IntentQA); `None` leaves them unjudged (the
            summary then says so and the score is `None`).
        eval_base: also evaluate the base model before the first step (pass 0).
        method: the label of this run in the side-by-side table (e.g. `RLCE (G=4)`).
    Runs on the main process; under ZeRO-3 (or FSDP) with several processes every process repeats its `generate`
    calls ([`~rlce_trl.evaluation.lockstep.run_on_main`]).
    """

    def __init__(self, rows: Sequence[dict], output_dir: str | Path, judge: Callable | None = None,
                 eval_base: bool = False, method: str = "", max_new_tokens: int = 512, batch_size: int = 8,
                 media_root: str | Path | None = None):
        if not rows or any("gold" not in r for r in rows):
            raise ValueError("The per-pass evaluation needs the adaptation split's rows with their `gold` column.")
        self.rows, self.output_dir, self.judge = list(rows), Path(output_dir), judge
        self.eval_base, self.method, self.media_root = eval_base, method, media_root
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size
        self.passes: list[dict] = []

    def _evaluate(self, state, model, processing_class, index: int) -> None:
        from ..evaluation.callbacks import evaluate_model
        from ..evaluation.lockstep import run_on_main

        # every process: under ZeRO-3 the others repeat the main process's generate calls (their summary is empty)
        summary = run_on_main(model, lambda: evaluate_model(
            self.rows, model, processing_class, self.output_dir / f"pass-{index}", self.judge, self.max_new_tokens,
            self.batch_size, self.media_root)) or {}
        self.passes.append({"pass": index, "step": state.global_step, "score": summary.get("score"),
                            "metric": summary.get("metric"), "summary": f"pass-{index}/summary.json"})
        if not state.is_world_process_zero:
            return
        record = {"method": self.method, "task": summary.get("task"), "num_rows": len(self.rows),
                  "passes": self.passes}
        write_json(record, self.output_dir / "passes.json")
        state.log_history.append({"step": state.global_step, "tta_pass": index, "tta_score": summary.get("score")})

    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        if self.eval_base and not any(p["pass"] == 0 for p in self.passes):
            self._evaluate(state, model, processing_class, 0)
        return control

    def on_epoch_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        self._evaluate(state, model, processing_class, len([p for p in self.passes if p["pass"] > 0]) + 1)
        return control
