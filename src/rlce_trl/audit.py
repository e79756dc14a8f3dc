"""The evidence audit trail: why each rollout got its reward, one JSON line per rollout group.

`RLCEGRPOTrainer` writes `<output_dir>/rlce_evidence.jsonl`; `rlce-trl report` turns it into a page. One record per
group and step (schema 1):

    id, step, mode ("train" / "eval"), method        which group: `id` is also the `rlce_group` column of the
                                                     completions table, so a completion leads to its group
    context, labels, completions                     what was compared (long texts cut, marked with "…")
    answers, assignment                              distinct canonical answers; rollout g has answer assignment[g]
    tests                                            every evidence test: favoured, against (answer indices; None for a
                                                     pointwise test), text, verdict, failure, round (0, or 1 for the
                                                     tie-break round), choice_logprobs (per-choice log-probabilities
                                                     of the verdict when the verifier returns them)
    scores, rewards, winner, verified_answer,        the outcome: per-answer scores, per-rollout task rewards, the
    status, tie_break_round                          verified answer's index (None without one), the group status
    extra                                            what a baseline keeps besides (e.g. the prompt's rubrics)

The training-health monitor (`rlce_trl.health`) adds one `{"type": "health_alarm", "step": ...}` line per alarm.

Only plain data goes in (no torch, no trainer): `group_record` + [`EvidenceLog`] serve any caller that scores groups,
the trainer through [`EvidenceRecorder`] (append-only, resumable, with a size limit).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from .data.jsonl import append_jsonl, json_line, rotate_jsonl, rotated_paths, truncate_jsonl

logger = logging.getLogger(__name__)

EVIDENCE_FILE = "rlce_evidence.jsonl"
SCHEMA = 1
CONTEXT_CHARS = 6000  # of a prompt context kept per record (its end, where the question is)
COMPLETION_CHARS = 2000  # of each rollout kept per record
_KNOWN_FIELDS = {"verified", "status", "answers", "scores", "verified_answer", "assignment", "tests"}


def group_id(mode: str, step: int, index: int) -> str:
    """`"<step>-<index>"` for training groups, `"<mode>-<step>-<index>"` otherwise."""
    return f"{step}-{index}" if mode == "train" else f"{mode}-{step}-{index}"


def plain(value):
    """`value` as strict JSON data: non-finite floats become None, tuples lists, dataclasses dicts."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    if value is None or isinstance(value, (str, int, bool)):
        return value
    if hasattr(value, "item"):  # a numpy / torch scalar
        return plain(value.item())
    return str(value)


def _cut(text: str | None, limit: int, keep_end: bool = False) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return "…" + text[-limit:] if keep_end else text[:limit] + "…"


def test_record(test) -> dict:
    """One evidence test (an `EvidenceTest` or anything with its attributes) as plain data."""
    logprobs = getattr(test, "choice_logprobs", None)
    return {**{name: getattr(test, name) for name in ("favoured", "against", "text", "verdict", "failure")},
            "round": 1 if getattr(test, "tie_break", False) else 0,
            "choice_logprobs": plain(dict(logprobs)) if logprobs else None}


def group_record(group, result, *, group_id: str, step: int, mode: str = "train", method: str = "rlce",
                 extra: dict | None = None) -> dict:
    """The record of one scored group: `group` a `scoring.Group`, `result` its `GroupResult` (RLCE or any
    baseline). Fields a newer `GroupResult` carries beyond the known ones land under `extra`."""
    answers = list(result.answers)
    winner = answers.index(result.verified_answer) if result.verified_answer in answers else None
    tests = [test_record(t) for t in (result.tests or [])]
    more = {}
    if dataclasses.is_dataclass(result):
        more = {f.name: getattr(result, f.name) for f in dataclasses.fields(result) if f.name not in _KNOWN_FIELDS}
    more.update(extra or {})
    return plain({
        "schema": SCHEMA,
        "id": group_id,
        "step": step,
        "mode": mode,
        "method": method,
        "status": result.status,
        "context": _cut(group.context, CONTEXT_CHARS, keep_end=True),
        "labels": list(group.labels) if group.labels else None,
        "completions": [_cut(c, COMPLETION_CHARS) for c in group.completions],
        "answers": answers,
        "assignment": list(result.assignment),
        "tests": tests,
        "scores": list(result.scores),
        "rewards": list(result.verified),
        "winner": winner,
        "verified_answer": result.verified_answer,
        "tie_break_round": any(t["round"] for t in tests),
        "extra": more or None,
    })


class EvidenceLog:
    """An append-only JSONL file of group records with an optional size limit (`max_bytes`, None: no limit).

    At the limit the trail stops (`rotate=0`: the start of the run is kept) or rotates (`rotate=N`: the file becomes
    `rlce_evidence.1.jsonl`, older parts shift up to `rlce_evidence.N.jsonl`, the oldest is removed, and a fresh file
    begins: the newest records are kept, at most `(N + 1) * max_bytes` on disk)."""

    def __init__(self, path: str | os.PathLike, max_bytes: int | None = None, rotate: int = 0):
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.rotate = rotate
        self.limit_reached = False
        self.rotations = 0

    def write(self, records: Iterable[dict]) -> int:
        """Append `records`; returns how many were written. Past the size limit the file rotates (`rotate > 0`), or
        nothing more is written but one `{"type": "limit"}` line that tells the report where the trail stops."""
        if self.limit_reached:
            return 0
        size = self.path.stat().st_size if self.path.exists() else 0
        kept, limit, written = [], [], 0
        for record in records:
            if self.max_bytes is not None:
                line = len(json_line(record, allow_nan=False).encode())
                if self.rotate and size + line > self.max_bytes and (size or kept):
                    written += append_jsonl(kept, self.path, allow_nan=False)
                    rotate_jsonl(self.path, self.rotate)
                    self.rotations += 1
                    logger.info("Evidence trail %s reached %d bytes at step %s: rotated (the %d newest parts are "
                                "kept).", self.path, self.max_bytes, record.get("step"), self.rotate)
                    kept, size = [], 0
                size += line
                if size > self.max_bytes and not self.rotate:
                    self.limit_reached = True
                    logger.warning("Evidence trail %s reached its size limit (%d bytes) at step %s: no more groups "
                                   "are recorded. Raise rlce_evidence_max_mb to keep more.", self.path,
                                   self.max_bytes, record.get("step"))
                    limit = [{"type": "limit", "step": record.get("step"), "max_bytes": self.max_bytes}]
                    break
            kept.append(record)
        append_jsonl(kept + limit, self.path, allow_nan=False)
        return written + len(kept)

    def truncate_after(self, step: int) -> int:
        """Drop the records of steps after `step` (a run resumed from checkpoint `step` redoes them) and any
        unreadable line, from the file and its rotated parts; returns how many lines were dropped."""
        def keep(r):
            return isinstance(r.get("step"), int) and r["step"] <= step and r.get("type") != "limit"
        return sum(truncate_jsonl(part, keep) for part in [self.path, *rotated_paths(self.path)])


class EvidenceRecorder:
    """The trainer's side of the trail. Every process names the groups (`next_ids`, identical on all ranks, for the
    completions table) and builds the records of the groups it scored; the main process writes them all once the
    step's records are gathered. The first write of a run drops records of steps beyond the one it starts from.

    Args:
        path: the JSONL file (`<output_dir>/rlce_evidence.jsonl`).
        method: reward method name written into each record.
        max_mb: size limit in MB; 0 or None: no limit.
        rotate: at the size limit keep this many rotated parts and start a fresh file; 0: stop the trail there.
        enabled: False writes no file (group ids are still handed out, records are still built for `listeners`).
        is_main: whether this process writes.
    """

    def __init__(self, path, method: str, max_mb: float | None = None, enabled: bool = True, is_main: bool = True,
                 rotate: int = 0):
        self.log = EvidenceLog(path, int(max_mb * 1024 * 1024) if max_mb else None, rotate)
        self.method, self.enabled, self.is_main = method, enabled, is_main
        self._next: dict[tuple[str, int], int] = {}
        self._started = False
        #: Called on the main process with each call's group records, whether or not the file is written (or past
        #: its size limit): the trackio traces of `rlce_trl.tracking` are built from them.
        self.listeners: list[Callable[[list[dict]], None]] = []

    def next_ids(self, mode: str, step: int, n: int) -> list[str]:
        start = self._next.get((mode, step), 0)
        self._next[(mode, step)] = start + n
        return [group_id(mode, step, start + i) for i in range(n)]

    def record(self, group, result, gid: str, step: int, mode: str, scorer=None) -> dict | None:
        if not (self.enabled or self.listeners):
            return None
        return group_record(group, result, group_id=gid, step=step, mode=mode, method=self.method,
                            extra=scorer.record_details(group) if scorer is not None else None)

    def write(self, records: Sequence[dict | None], completed_steps: int) -> int:
        if not self.is_main:
            return 0
        records = [r for r in records if r is not None]
        for listener in self.listeners:
            listener(records)
        if not self.enabled:
            return 0
        if not self._started:
            self._started = True
            dropped = self.log.truncate_after(completed_steps if completed_steps else -1)  # a fresh run: all
            if dropped:
                logger.info("Evidence trail: dropped %d records after step %d (the run resumes there).", dropped,
                            completed_steps)
        return self.log.write(records)
