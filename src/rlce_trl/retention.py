"""What a long run keeps of its per-step tables: TRL's completions tables (`log_completions=True`) are one parquet
file per logged step, `<output_dir>/completions/completions_<step>.parquet`, and nothing removes them. With
`rlce_completions_keep=N` the [`CompletionsRetention`] callback keeps the N newest after every step (the report
shows the newest rows first, so it loses nothing it would show when N covers its 1,000 rows).

The evidence trail's own cap and rotation are `rlce_evidence_max_mb` / `rlce_evidence_rotate` (`rlce_trl.audit`).
"""

from __future__ import annotations

import glob
import logging
import os

from transformers import TrainerCallback

logger = logging.getLogger(__name__)

COMPLETIONS_PATTERN = os.path.join("completions", "completions_*.parquet")


def prune_completions(output_dir: str, keep: int) -> int:
    """Remove all but the `keep` newest completions tables; returns how many were removed (0 when `keep` <= 0)."""
    if keep <= 0:
        return 0
    removed = 0
    tables = sorted(glob.glob(os.path.join(output_dir, COMPLETIONS_PATTERN)))  # oldest first: zero-padded steps
    for path in tables[:-keep]:
        try:
            os.unlink(path)
            removed += 1
        except FileNotFoundError:
            pass
    return removed


class CompletionsRetention(TrainerCallback):
    """Keep the `keep` newest completions tables (main process, after every step and at the end of training)."""

    def __init__(self, output_dir: str, keep: int, is_main: bool = True):
        self.output_dir, self.keep, self.is_main = output_dir, keep, is_main
        self.removed = 0

    def _prune(self) -> None:
        if self.is_main:
            self.removed += prune_completions(self.output_dir, self.keep)

    def on_step_end(self, args, state, control, **kwargs):
        self._prune()

    def on_train_end(self, args, state, control, **kwargs):
        self._prune()
        if self.removed:
            logger.info("Completions tables: removed %d older tables, kept the %d newest (rlce_completions_keep).",
                        self.removed, self.keep)
