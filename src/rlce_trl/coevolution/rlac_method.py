"""RLAC (D.6, Algorithm 4) as a co-evolution method: its phases per round and the data between them (the scorers of
its phases, `rlac_generator` / `rlac_critic`, are in [`rlce_trl.methods.rlac`])."""

from __future__ import annotations

import logging
import time

from ..data.jsonl import read_jsonl, write_jsonl
from ..errors import InputError
from .base import BuildContext, PhaseSpec, partner_round
from .corpus import picked_corpus

logger = logging.getLogger(__name__)

#: Table 15: 18 optimizer steps per role per round.
RLAC_STEPS = {"generator": 18, "critic": 18}


class RLAC:
    """RLAC (D.6, Algorithm 4): per round, the generator phase against the frozen critic `C_t`, the harvest of one
    pair per clip from the new generator, the critic phase. The generator is validated and returned.

    Settings (recipe keys): `coevolve_phase_steps` (`{"generator": 18, "critic": 18}`), `coevolve_phase_overrides`
    (per phase config keys), `coevolve_corpus_size` (clips drawn once, seeded; the paper: 600), `rlac_max_pairs`
    (M, the paper: 600), `hba_task`."""

    name = "rlac"
    roles = ("generator", "critic")
    validated_role = "generator"

    def __init__(self, settings: dict | None = None):
        self.settings = dict(settings or {})
        if self.settings.get("build_kwargs"):
            raise InputError("coevolve_build_kwargs: RLAC's harvest takes no options (its pair cap is "
                             "rlac_max_pairs); drop the key or use --method visplay / video_zero.")

    def phases(self, round: int, settings: dict | None = None) -> list[PhaseSpec]:
        return partner_round({**self.settings, **(settings or {})}, RLAC_STEPS, "generator", "critic",
                             ("rlac_generator", "rlac_critic"))

    def build_data(self, ctx: BuildContext) -> dict:
        from ..methods.rlac import generator_rows

        if ctx.phase.name == "generator":
            rows = picked_corpus(ctx.train_file, self.settings, ctx.seed)
            write_jsonl(generator_rows(rows), ctx.output_file)
            return {"rows": len(rows)}
        return harvest(ctx, int(self.settings.get("max_pairs") or 600))


def harvest(ctx: BuildContext, max_pairs: int) -> dict:
    """P_{t+1}: one response per clip from the new generator (sampled at its rollout temperature / top-p), at most
    `max_pairs` clips (seeded), written as critic rows. Runs in the build process (it loads the generator)."""
    from ..generation.generators import make_generator
    from ..generation.sampling import Sampling
    from ..methods.rlac import critic_rows, pick_clips

    script_args, training_args, _ = ctx.args
    source = ctx.data.get("generator")
    if not source:
        raise InputError("The critic phase's harvest needs the generator phase's data: resume the run from its start.")
    generated = read_jsonl(source)
    rows = pick_clips(generated, max_pairs, ctx.seed + ctx.round)
    video = any(r.get("videos") for r in rows)
    overrides = (script_args.coevolve_phase_overrides or {}).get("generator", {})
    max_new = int(overrides.get("max_completion_length", training_args.max_completion_length or 256))
    backend = "vllm" if training_args.use_vllm and not video else "transformers"
    start = time.monotonic()
    generator = make_generator(ctx.checkpoints["generator"], backend, video=video, max_new_tokens=max_new)
    logger.info("harvest: %s loaded (%s) in %.1f s", ctx.checkpoints["generator"], backend, time.monotonic() - start)
    start = time.monotonic()
    prompts = [_prompt(r, script_args, training_args) for r in rows]
    if hasattr(generator, "sample"):
        spec = Sampling(temperature=training_args.temperature, top_p=training_args.top_p or 1.0,
                        top_k=training_args.top_k or 0, seed=ctx.seed + ctx.round)
        responses = [s[0].text for s in generator.sample(prompts, [spec])]
    else:  # the vision-language generator decodes greedily
        responses = generator(prompts)
    logger.info("harvest: %d responses of at most %d tokens in %.1f s", len(responses), max_new,
                time.monotonic() - start)
    out = critic_rows(rows, responses)
    write_jsonl(out, ctx.output_file)
    return {"pairs": len(out), "clips": len(generated), "max_pairs": max_pairs}


def _prompt(row: dict, script_args, training_args) -> list[dict]:
    if row.get("videos"):
        from ..data.hba import expand_videos

        return expand_videos(row, script_args.media_root, **training_args.frame_kwargs())["prompt"]
    return row["prompt"]
