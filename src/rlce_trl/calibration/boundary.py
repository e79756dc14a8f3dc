"""Boundary detection (VeriFine section 3.4, reconstructed): flag when the verification reward keeps rising while the
validation score does not -- in RLCE a sign that the policy found answers whose tests are easy to satisfy.

At every check t (each `check_every` optimizer steps) with P_t the validation score (0-100) and R_t the mean verified
reward over the interval x 100:

    dP_bar_t = mean of the last K  dP            (plateau:     dP_bar_t < plateau_threshold)
    G_t      = mean of the last K (dR - dP)      (discrepancy: G_t      > discrepancy_threshold)

The paper gives K=4 and one threshold of 0.5 without saying which statistic it applies to or whether the rule is AND or
OR; both thresholds and `mode` ("and" / "or") are settings.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from transformers import TrainerCallback

logger = logging.getLogger(__name__)

REWARD_KEY = "rewards/rlce_verified/mean"


@dataclass
class BoundaryDetector:
    """The rule alone, fed one (reward, score) pair per check; `update` returns True when it fires."""

    window: int = 4
    plateau_threshold: float = 0.5
    discrepancy_threshold: float = 0.5
    mode: str = "and"
    points: list[tuple[float, float]] = field(default_factory=list)  # (R_t, P_t) per check
    fired_at: list[int] = field(default_factory=list)  # check indices (0-based) where it fired

    def __post_init__(self):
        if self.mode not in ("and", "or"):
            raise ValueError(f"mode must be 'and' or 'or', not {self.mode!r}.")
        if self.window < 1:
            raise ValueError("window must be >= 1.")

    def update(self, reward: float, score: float) -> bool:
        self.points.append((reward, score))
        if len(self.points) <= self.window:  # K deltas need K + 1 points
            return False
        recent = self.points[-(self.window + 1) :]
        d_p = [b[1] - a[1] for a, b in pairwise(recent)]
        d_r = [b[0] - a[0] for a, b in pairwise(recent)]
        plateau = sum(d_p) / self.window < self.plateau_threshold
        gap = sum(r - p for r, p in zip(d_r, d_p, strict=True)) / self.window > self.discrepancy_threshold
        fired = (plateau and gap) if self.mode == "and" else (plateau or gap)
        if fired:
            self.fired_at.append(len(self.points) - 1)
        return fired


class BoundaryCallback(TrainerCallback):
    """Run the [`BoundaryDetector`] during training.

    Args:
        validation: the run's `BestCheckpointCallback` (its `history` gives P_t), or any object with a `history` list
            of `{"step", "score"}`.
        check_every: optimizer steps between checks (the paper: 150).
        stop_on_trigger: stop training when it fires.
        groups_file: optional logged-groups file (bench format); when it fires, `select_queries` over it is written to
            `<output_dir>/calibration/queries-step-N.jsonl`. A `boundary-step-N.json` with the series is always
            written.
    """

    def __init__(
        self,
        validation,
        check_every: int = 150,
        window: int = 4,
        plateau_threshold: float = 0.5,
        discrepancy_threshold: float = 0.5,
        mode: str = "and",
        stop_on_trigger: bool = False,
        groups_file: str | None = None,
        k: int = 50,
    ):
        if check_every < 1:
            raise ValueError("check_every must be >= 1.")
        self.validation = validation
        self.check_every, self.stop_on_trigger = check_every, stop_on_trigger
        self.groups_file, self.k = groups_file, k
        self.detector = BoundaryDetector(window, plateau_threshold, discrepancy_threshold, mode)
        self.rewards: list[float] = []
        self.events: list[dict] = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and REWARD_KEY in logs:
            self.rewards.append(float(logs[REWARD_KEY]))

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % self.check_every or not self.rewards:
            return control
        history = getattr(self.validation, "history", None) or []
        if not history:
            return control  # no validation yet: nothing to compare against
        reward = 100.0 * sum(self.rewards) / len(self.rewards)
        self.rewards = []
        score = float(history[-1]["score"])
        if self.detector.update(reward, score):
            event = {"step": state.global_step, "series": [list(p) for p in self.detector.points]}
            self.events.append(event)
            logger.warning(
                "Boundary at step %d: verification reward rises while the validation score stays flat.",
                state.global_step,
            )
            if state.is_world_process_zero:
                self._write(Path(args.output_dir) / "calibration", event)
            if self.stop_on_trigger:
                control.should_training_stop = True
        return control

    def _write(self, folder: Path, event: dict) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"boundary-step-{event['step']}.json").write_text(json.dumps(event, indent=2) + "\n")
        if self.groups_file:
            from ..data.jsonl import read_jsonl, write_jsonl
            from .queries import select_queries

            try:
                queries, _ = select_queries(read_jsonl(self.groups_file), self.k)
            except (OSError, ValueError) as error:
                logger.warning("Boundary queries not written: cannot read %s (%s).", self.groups_file, error)
                return
            write_jsonl(queries, folder / f"queries-step-{event['step']}.jsonl")
