"""Reward functions with TRL's contract: `f(prompts, completions, **kwargs) -> list[float | None]`.

- [`rlce_format`]: the `\\boxed{}` format reward (appendix C.2), per completion.
- [`RLCEReward`]: the comparative-evidence verification reward (Eq. 5) for a plain `GRPOTrainer` running in ONE
  process, where every rollout group is local. With several processes a group can straddle ranks: use
  [`RLCEGRPOTrainer`], which gathers whole groups before scoring them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from .data.media import has_raw_frames, media_items, media_key
from .data.prompts import completion_text
from .evidence.pipeline import EvidencePipeline, EvidenceSettings
from .evidence.prompts import render_context
from .evidence.reward import format_reward
from .scoring import Group, GroupResult, StepStats
from .verifiers.base import Verifier


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


def group_log_columns(result: GroupResult) -> dict[str, list]:
    """Completions-table columns for the rollouts of one group: each rollout's canonical answer, the verified answer
    and the verification scores (Eq. 3) of all distinct answers."""
    scores = "; ".join(
        f"{answer[:60]}: {'n/a' if s is None else f'{s:+.2f}'}"
        for answer, s in zip(result.answers, result.scores, strict=False)  # no scores for a single answer
    )
    n = len(result.verified)
    return {
        "rlce_answer": [None if a is None else result.answers[a] for a in result.assignment],
        "rlce_verified_answer": [result.verified_answer] * n,
        "rlce_scores": [scores] * n,
        "rlce_status": [result.status] * n,
    }


def completion_columns(results: Sequence[GroupResult], group_ids: Sequence | None = None) -> dict[str, list]:
    """The completions-table columns of a batch: [`group_log_columns`] of every group, concatenated in group order,
    plus `rlce_group` (each rollout's group id in the evidence trail) when `group_ids` are given."""
    columns: dict[str, list] = {}
    for g, result in enumerate(results):
        named = group_log_columns(result)
        if group_ids is not None:
            named["rlce_group"] = [group_ids[g]] * len(result.verified)
        for name, values in named.items():
            columns.setdefault(name, []).extend(values)
    return columns


def metric_key(method: str, name: str) -> str:
    """The logged name of a per-step metric: `<method>/<name>`, the method being `rlce` for RLCE and its ablations,
    else the scorer's name (`usc/verified_fraction`)."""
    return f"{method}/{name}"


def log_step_stats(stats: StepStats, log_metric, method: str = "rlce") -> None:
    """Log the step metrics of `stats` ([`StepStats.metrics`]) under their [`metric_key`] names."""
    for name, value in stats.metrics().items():
        log_metric(metric_key(method, name), value)


class RLCEReward:
    """Comparative-evidence verification reward (Eq. 5) as a reward function, for ONE process.

    Args:
        verifier: the frozen verifier.
        num_generations: G, the group size of the trainer.
        settings: [`~rlce_trl.evidence.pipeline.EvidenceSettings`].
        labels_column: dataset column holding a row's closed label set.

    Example:
    ```python
    from trl import GRPOTrainer
    from rlce_trl import RLCEReward, rlce_format
    from rlce_trl.verifiers import TransformersVerifier, load_frozen_model

    verifier = TransformersVerifier(*load_frozen_model("my-initial-checkpoint"))
    trainer = GRPOTrainer(model="my-initial-checkpoint", reward_funcs=[RLCEReward(verifier, 4), rlce_format],
                          args=GRPOConfig(num_generations=4, reward_weights=[0.8, 0.2]), train_dataset=ds)
    ```
    """

    __name__ = "rlce_verified"

    def __init__(self, verifier: Verifier, num_generations: int, settings: EvidenceSettings | None = None,
                 labels_column: str = "answer_options"):
        self.pipeline = EvidencePipeline(verifier, settings)
        self.num_generations = num_generations
        self.labels_column = labels_column

    def __call__(self, prompts, completions, log_metric=None, log_extra=None, **kwargs) -> list[float | None]:
        if any(has_raw_frames(p) for p in prompts):
            raise ValueError(
                "These rows carry video frames, which TRL's GRPOTrainer (1.16) does not feed to the loss: it would "
                "train on prompts without pixels. Use rlce_trl.RLCEGRPOTrainer (video_input='video'), or drop the "
                "frames (rlce_trl.data.media.text_only_prompt)."
            )
        groups = build_groups(prompts, completions, kwargs.get(self.labels_column), self.num_generations,
                              kwargs.get("question"))
        results, stats = self.pipeline.score(groups)
        if log_metric is not None:
            log_step_stats(stats, log_metric)
        if log_extra is not None:
            for name, values in completion_columns(results).items():
                log_extra(name, values)
        return [reward for result in results for reward in result.verified]
