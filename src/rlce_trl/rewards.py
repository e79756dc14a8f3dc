"""Reward functions with TRL's contract: `f(prompts, completions, **kwargs) -> list[float | None]`.

- [`rlce_format`]: the `\\boxed{}` format reward (appendix C.2), per completion.
- [`RLCEReward`] and its async form [`AsyncRLCEReward`]: the comparative-evidence verification reward (Eq. 5) for
  every TRL trainer that takes reward functions. It needs whole rollout groups in each call ([`RLCEGRPOTrainer`]
  gathers them across processes first).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import os
import threading
import time
from collections.abc import Sequence
from types import SimpleNamespace

from .data.media import has_raw_frames, media_items, media_key
from .data.prompts import completion_text
from .evidence.pipeline import EvidencePipeline, EvidenceSettings, settings_from_fields
from .evidence.prompts import render_context
from .evidence.reward import format_reward
from .scoring import Group, GroupResult, StepStats
from .verifiers.base import Verifier, deadline

logger = logging.getLogger(__name__)


def rlce_format(completions, **kwargs) -> list[float]:
    """1.0 for a completion that ends in the required `\\boxed{}` answer format, else 0.0."""
    return [format_reward(completion_text(c)) for c in completions]


def build_groups(prompts: Sequence, completions: Sequence, labels: Sequence | None, num_generations: int,
                 questions: Sequence | None = None, columns: Sequence[dict] | None = None) -> list[Group]:
    """Cut a flat, sampler-ordered batch into rollout groups: rows `g*G .. (g+1)*G - 1` are group `g`. `labels` and
    `questions` are per-row dataset columns (a row's closed label set; its bare question), or `None`; `columns`, per
    row, the other dataset columns a scorer asked for (`Group.columns`)."""
    if len(prompts) % num_generations:
        raise ValueError(
            f"{len(prompts)} completions do not split into groups of num_generations={num_generations}: RLCE needs "
            "every rollout group whole. Use RLCEGRPOTrainer (it gathers groups across processes)."
        )
    groups = []
    for start in range(0, len(prompts), num_generations):
        options = labels[start] if labels is not None else None
        context = render_context(prompts[start])
        media = media_items(prompts[start])  # the clip: every verifier stage sees it
        groups.append(
            Group(
                context=context,
                completions=[completion_text(c) for c in completions[start : start + num_generations]],
                labels=tuple(options) if options else None,
                question=questions[start] if questions is not None else None,
                media=media,
                columns=dict(columns[start]) if columns is not None else None,
                key=hashlib.sha1((context + media_key(media)).encode()).hexdigest() if media else None,
            )
        )
    return groups


def completion_columns(results: Sequence[GroupResult], group_ids: Sequence | None = None) -> dict[str, list]:
    """The completions-table columns of a batch, per rollout in group order: its canonical answer, its group's
    verified answer, verification scores (Eq. 3) of all distinct answers and status, and `rlce_group` (its group's id
    in the evidence trail) when `group_ids` are given."""
    columns: dict[str, list] = {}
    for g, result in enumerate(results):
        scores = "; ".join(
            f"{answer[:60]}: {'n/a' if s is None else f'{s:+.2f}'}"
            for answer, s in zip(result.answers, result.scores, strict=False)  # no scores for a single answer
        )
        n = len(result.verified)
        named = {
            "rlce_answer": [None if a is None else result.answers[a] for a in result.assignment],
            "rlce_verified_answer": [result.verified_answer] * n,
            "rlce_scores": [scores] * n,
            "rlce_status": [result.status] * n,
        }
        if group_ids is not None:
            named["rlce_group"] = [group_ids[g]] * n
        for name, values in named.items():
            columns.setdefault(name, []).extend(values)
    return columns


def group_size(prompts: Sequence, num_generations: int | None = None) -> int:
    """G for a flat, sampler-ordered batch: `num_generations` when given, else found from the batch itself (TRL does
    not pass it to reward functions). TRL's sampler repeats each row G times in a row, so the batch is runs of equal
    prompts, each a multiple of G: G is the greatest common divisor of the run lengths. Two equal rows that the
    sampler happened to draw one after the other make one longer run, which the divisor still cuts right unless every
    run of the batch is such a pair; pass `num_generations` where that matters."""
    if num_generations:
        return num_generations
    runs, start = [], 0
    for i in range(1, len(prompts) + 1):
        if i == len(prompts) or prompts[i] != prompts[start]:
            runs.append(i - start)
            start = i
    return math.gcd(*runs) if runs else 1


def _unscored(n: int) -> GroupResult:
    """The result of a group that failed or ran out of time: no reward (TRL leaves its rollouts out)."""
    return GroupResult(verified=[None] * n, status="verifier_failed", answers=[], scores=[], verified_answer=None,
                       assignment=[None] * n)


class RLCEReward:
    """The comparative-evidence verification reward (Eq. 5) as a reward function: one picklable object for
    `GRPOTrainer`, `RLOOTrainer` and `AsyncGRPOTrainer` (and the TRL CLI: `rlce_trl.rlce_reward`).

    Args:
        verifier: the frozen verifier: a [`Verifier`] you built, or a description the verifier is built from, lazily,
            in the process that calls the reward (the trainer's, or the asynchronous trainer's rollout child): a model
            folder or Hub id (transformers backend), or server URLs (`http://...`, comma-separated).
        num_generations: G; `None`: found from each batch ([`group_size`]).
        settings: [`~rlce_trl.evidence.pipeline.EvidenceSettings`]; default: from `options`.
        labels_column: dataset column holding a row's closed label set; default: `options["rlce_labels_column"]`.
        options: the `rlce_*` / `verifier_*` settings, as `RLCEGRPOConfig.reward_options()` gives them (the TRL CLI's
            `RLCE_CONFIG` file is read into the same); `None`: each component's defaults.
        group_deadline_s: the async form's overall deadline per group; default `verifier_request_deadline`.

    Every call needs whole rollout groups: one process, or `per_device_train_batch_size * steps_per_generation` a
    multiple of G. A group whose verifier requests all failed, or (async form) that ran past its deadline, gets `None`
    for every rollout and is counted in `rlce/failed_groups`; a verifier that failed persistently stops the run.

    Example:
    ```python
    from trl import GRPOConfig, GRPOTrainer
    from rlce_trl import RLCEReward, rlce_format

    reward = RLCEReward("my-initial-checkpoint")  # or "http://127.0.0.1:8000" for a verifier server
    trainer = GRPOTrainer(model="my-initial-checkpoint", reward_funcs=[reward, rlce_format],
                          args=GRPOConfig(num_generations=4, reward_weights=[0.8, 0.2]), train_dataset=ds)
    ```
    """

    __name__ = "rlce_verified"

    def __init__(self, verifier: Verifier | str, num_generations: int | None = None,
                 settings: EvidenceSettings | None = None, labels_column: str | None = None, *,
                 options: dict | None = None, group_deadline_s: float | None = None):
        if not isinstance(verifier, (Verifier, str)) or (isinstance(verifier, str) and not verifier.strip()):
            raise TypeError("RLCEReward needs a verifier: a Verifier, a model folder or Hub id, or a server URL.")
        self.options = dict(options) if options is not None else None
        self.description = verifier if isinstance(verifier, str) else None
        self.num_generations = num_generations
        self.settings = settings_from_fields(options) if settings is None and options is not None else settings
        self.labels_column = labels_column or (options or {}).get("rlce_labels_column") or "answer_options"
        self.group_deadline_s = group_deadline_s or (options or {}).get("verifier_request_deadline") or 900.0
        #: Groups that got no reward because the verifier failed or the group ran out of time, since construction.
        self.failed_groups = 0
        self._given = verifier if isinstance(verifier, Verifier) else None
        self._reset()

    @classmethod
    def from_config(cls, args, verifier: Verifier | str | None = None, **kwargs) -> RLCEReward:
        """The reward an `RLCEGRPOConfig` describes: its `rlce_*` / `verifier_*` settings and G; the verifier
        `verifier`, else its `verifier_server_base_url` (server mode) or `verifier_model_name_or_path`."""
        if verifier is None:
            verifier = args.verifier_server_base_url if args.verifier_mode == "server" else (
                args.verifier_model_name_or_path)
        if verifier is None:
            raise ValueError("RLCEReward.from_config: name the verifier (verifier=..., verifier_model_name_or_path or "
                             "verifier_server_base_url).")
        return cls(verifier, kwargs.pop("num_generations", args.num_generations), options=args.reward_options(),
                   **kwargs)

    def as_async(self) -> AsyncRLCEReward:
        """The async form with the same settings (and the same verifier, when one was given built)."""
        return AsyncRLCEReward(self._given or self.description, self.num_generations, self.settings,
                               self.labels_column, options=self.options, group_deadline_s=self.group_deadline_s)

    # -- the verifier, built in the calling process -------------------------------------------------------------------
    def _reset(self) -> None:
        self._pipeline: EvidencePipeline | None = None
        self._pid = None
        self._lock = threading.Lock()

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("_pipeline", "_pid", "_lock")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._reset()

    @property
    def verifier(self) -> Verifier:
        return self.pipeline.verifier

    @property
    def pipeline(self) -> EvidencePipeline:
        """The evidence pipeline over this process's verifier, built on first use in each process."""
        with self._lock:
            if self._pipeline is None or self._pid != os.getpid():
                verifier = self._given
                if verifier is None:
                    from .verifiers.from_config import described_verifier

                    options = SimpleNamespace(**self.options) if self.options is not None else None
                    verifier = described_verifier(self.description, options)
                self._pipeline, self._pid = EvidencePipeline(verifier, self.settings), os.getpid()
            return self._pipeline

    # -- scoring --------------------------------------------------------------------------------------------------
    def _groups(self, prompts, completions, kwargs) -> list[Group]:
        if any(has_raw_frames(p) for p in prompts):
            raise ValueError(
                "These rows carry video frames, which TRL's GRPOTrainer (1.16) does not feed to the loss: it would "
                "train on prompts without pixels. Use rlce_trl.RLCEGRPOTrainer (video_input='video'), or drop the "
                "frames (rlce_trl.data.media.text_only_prompt)."
            )
        return build_groups(prompts, completions, kwargs.get(self.labels_column),
                            group_size(prompts, self.num_generations), kwargs.get("question"))

    def _score(self, groups: list[Group], at: float | None = None) -> tuple[list[GroupResult], StepStats, int]:
        """Score `groups` in one batched pipeline call, ending by the monotonic time `at` (the async form's group
        deadline); a group past it, or whose verifier requests all failed, gets no reward. Returns the results, the
        stats and how many groups failed."""
        pipeline = self.pipeline
        concurrent = getattr(pipeline.verifier, "base_urls", None) is not None  # a server takes concurrent calls
        with (contextlib.nullcontext() if concurrent else self._lock), deadline(at):
            results, stats = pipeline.score(groups)
        if at is not None and time.monotonic() >= at:
            results = [_unscored(len(g.completions)) for g in groups]
        return results, stats, sum(r.status == "verifier_failed" for r in results)

    def _finish(self, results, stats, failed: int, log_metric, log_extra) -> list[float | None]:
        self.failed_groups += failed
        if failed:
            logger.warning("RLCE: %d of %d groups got no reward (the verifier failed or the group ran out of time); "
                           "%d since the start.", failed, len(results), self.failed_groups)
        if log_metric is not None:
            for name, value in stats.metrics().items():
                log_metric(f"rlce/{name}", value)
            log_metric("rlce/failed_groups", float(failed))
            unscored = sum(all(v is None for v in r.verified) for r in results)
            log_metric("rlce/unscored_fraction", unscored / max(len(results), 1))
        if log_extra is not None:
            for name, values in completion_columns(results).items():
                log_extra(name, values)
        return [reward for result in results for reward in result.verified]

    def __call__(self, prompts, completions, log_metric=None, log_extra=None, **kwargs) -> list[float | None]:
        """All groups of the batch in one batched pipeline call (the rewards `RLCEGRPOTrainer` gives)."""
        results, stats, failed = self._score(self._groups(prompts, completions, kwargs))
        return self._finish(results, stats, failed, log_metric, log_extra)


class AsyncRLCEReward(RLCEReward):
    """[`RLCEReward`] as a coroutine (TRL awaits it: `AsyncGRPOTrainer` once per finished group, `GRPOTrainer` on its
    reward loop): each group is scored on its own, its requests sent concurrently, under one overall deadline per
    group (`group_deadline_s`); a group past it gets `None` and is counted in `rlce/failed_groups`."""

    async def _score_one(self, group: Group) -> tuple[list[GroupResult], StepStats, int]:
        at = time.monotonic() + self.group_deadline_s
        try:  # a server request ends at `at` by itself; an in-process forward pass is waited for no longer
            return await asyncio.wait_for(asyncio.to_thread(self._score, [group], at), self.group_deadline_s + 1.0)
        except TimeoutError:
            return [_unscored(len(group.completions))], StepStats(), 1

    async def __call__(self, prompts, completions, log_metric=None, log_extra=None, **kwargs):
        groups = self._groups(prompts, completions, kwargs)
        await asyncio.to_thread(lambda: self.pipeline)  # build the verifier (a model load) off the event loop
        outcomes = await asyncio.gather(*(self._score_one(g) for g in groups))
        results = [r for out in outcomes for r in out[0]]
        parts = sorted((out[1] for out in outcomes), key=lambda st: -len(type(st).__mro__))  # the method's own first
        stats = StepStats.merge(parts)  # of the class of the first part
        return self._finish(results, stats, sum(out[2] for out in outcomes), log_metric, log_extra)
