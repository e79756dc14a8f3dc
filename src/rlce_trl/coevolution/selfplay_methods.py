"""VisPlay (D.4) and Video-Zero (D.5) as driver methods, on the rewards, scorers and data builders of
`methods/visplay.py` and `methods/video_zero.py`.

- VisPlay: `R_t -> Q_{t+1} -> D_{t+1} -> R_{t+1}`. The questioner phase (`visplay_questioner`, the frozen reasoner
  as partner; 20 steps), the reasoner's data (`build_reasoner_rows`: the new questioner writes, the frozen reasoner
  pseudo-labels), the reasoner phase (`visplay_reasoner`, the pseudo-label reward as a group scorer; 20 steps).
- Video-Zero: `S_t -> Q_{t+1} -> D_{t+1} -> S_{t+1}`. The questioner phase (`vz_questioner`, the frozen solver as
  partner; 2 steps), the solver's data (`build_solver_rows`), the solver phase (`vz_solver`; 1 step).

The reasoner / solver rewards are the pseudo-label rewards of those modules as group scorers
(`rlce_trl.methods.pseudo_label`, reading the rows' columns through `Group.columns`), so each phase is one group
scorer like every other. The reasoner / solver is validated after every round.
"""

from __future__ import annotations

import inspect
import logging

from ..data.jsonl import write_jsonl
from ..errors import InputError
from .base import BuildContext, PhaseSpec, partner_round
from .corpus import picked_corpus

logger = logging.getLogger(__name__)


def _frozen(path: str, cache: dict, video: bool):
    """A frozen verifier of `path` (a vision-language one that sees the clips when the corpus has video), loaded once
    per build process, on the GPU when there is one."""
    if path not in cache:
        import torch

        from ..verifiers.from_config import frozen_verifier

        device = "cuda" if torch.cuda.is_available() else None
        cache[path] = frozen_verifier(path, vision_language=video, device=device)
    return cache[path]


class _SelfPlay:
    """The shared loop of VisPlay and Video-Zero: a questioner phase against the frozen answering role, the answering
    role's pseudo-labelled data, the answering role's phase. A method's `_functions()` gives its `questioner_row` and
    its answer-rows builder, from its module in `rlce_trl.methods` (imported when first needed)."""

    name = ""
    answerer = ""
    steps: dict[str, int] = {}
    rewards: tuple[str, str] = ("", "")

    def __init__(self, settings: dict | None = None):
        self.settings = dict(settings or {})
        self.roles = ("questioner", self.answerer)
        self.validated_role = self.answerer
        self.build_kwargs = dict(self.settings.get("build_kwargs") or {})
        builder = self._functions()[1]
        allowed = [p.name for p in inspect.signature(builder).parameters.values()
                   if p.kind is p.KEYWORD_ONLY and p.name != "seed"]
        if unknown := sorted(set(self.build_kwargs) - set(allowed)):
            raise InputError(f"coevolve_build_kwargs: unknown option(s) {', '.join(unknown)} for {self.name}'s "
                             f"{builder.__name__}; use {', '.join(allowed)}.")

    def phases(self, round: int, settings: dict | None = None) -> list[PhaseSpec]:
        return partner_round({**self.settings, **(settings or {})}, self.steps, "questioner", self.answerer,
                             self.rewards)

    def build_data(self, ctx: BuildContext) -> dict:
        questioner_row, build_rows = self._functions()
        corpus = picked_corpus(ctx.train_file, self.settings, ctx.seed)
        if ctx.phase.name == "questioner":
            rows = [questioner_row(r) for r in corpus]
            write_jsonl(rows, ctx.output_file)
            return {"rows": len(rows)}
        from ..methods.selfplay import seeded_subset

        cache: dict = {}
        clips = seeded_subset(corpus, self.build_kwargs.get("n_clips"), ctx.seed)  # fixed every round
        video = any(c.get("videos") for c in clips)
        questioner = _frozen(ctx.checkpoints["questioner"], cache, video)
        answerer = _frozen(ctx.checkpoints[self.answerer], cache, video)
        options = {k: v for k, v in self.build_kwargs.items() if k != "n_clips"}
        rows, stats = build_rows(clips, questioner, answerer, seed=ctx.seed + ctx.round, n_clips=None, **options)
        write_jsonl(rows, ctx.output_file)
        if not rows:  # the driver skips the phase (its checkpoint stays) and records why
            dropped = ", ".join(f"{k} {v}" for k, v in sorted(stats["dropped"].items())) or "none"
            stats["skip"] = (f"no {self.answerer} rows retained: {stats['parsed']} of {stats['generated']} generated "
                             f"questions parsed, dropped {dropped}")
            logger.warning("%s; the %s phase of this round is skipped", stats["skip"], self.answerer)
        return stats


class VisPlay(_SelfPlay):
    """VisPlay (D.4, Algorithm 2): 3 iterations, 20 steps per role (Table 12)."""

    name = "visplay"
    answerer = "reasoner"
    steps = {"questioner": 20, "reasoner": 20}
    rewards = ("visplay_questioner", "visplay_reasoner")

    @staticmethod
    def _functions():
        from ..methods.visplay import build_reasoner_rows, questioner_row

        return questioner_row, build_reasoner_rows


class VideoZero(_SelfPlay):
    """Video-Zero (D.5, Algorithm 3): at most 5 iterations, questioner 2 steps, solver 1 step (Table 14)."""

    name = "video_zero"
    answerer = "solver"
    steps = {"questioner": 2, "solver": 1}
    rewards = ("vz_questioner", "vz_solver")

    @staticmethod
    def _functions():
        from ..methods.video_zero import build_solver_rows, questioner_row

        return questioner_row, build_solver_rows

