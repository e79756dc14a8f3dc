"""The co-evolution methods `rlce-trl coevolve --method` knows, and RLAC's loop (phases and data between them)."""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Sequence
from pathlib import Path

from ..errors import InputError
from .base import BuildContext, CoevolutionMethod, PhaseSpec

#: Table 15: 18 optimizer steps per role per round.
RLAC_STEPS = {"generator": 18, "critic": 18}


def load_corpus(path: str, hba_task: str | None = None) -> list[dict]:
    """The corpus rows: an HBA split (`hba_task` set) or GRPO-ready JSONL rows with a `prompt` (PrefEval:
    `rlce-trl prepare-prefeval`). Gold is never read here."""
    from ..data.jsonl import read_jsonl

    if hba_task:
        from ..data.hba import load_hba_split

        return load_hba_split(path, hba_task, "train")
    rows = read_jsonl(path)
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), list) or not row["prompt"]:
            raise InputError(f"{path}, row {i + 1}: no `prompt` (a list of chat messages): pass GRPO-ready rows "
                             "(e.g. written by `rlce-trl prepare-prefeval`) or set hba_task for an HBA split.")
    if not rows:
        raise InputError(f"{path} has no rows: pass the training split.")
    return rows


def load_validation(path: str, hba_task: str | None = None) -> list[dict]:
    """The validation rows (with `gold`): an HBA validation split, or GRPO-ready JSONL rows."""
    from ..data.jsonl import read_jsonl

    if hba_task:
        from ..data.hba import load_hba_split

        return load_hba_split(path, hba_task, "validation")
    rows = read_jsonl(path)
    bad = [i + 1 for i, r in enumerate(rows) if not isinstance(r, dict) or "gold" not in r or "prompt" not in r]
    if not rows or bad:
        raise InputError(f"{path}: {'no rows' if not rows else f'row {bad[0]} has no prompt or gold'}; validation "
                         "needs rows with `prompt` and `gold` (e.g. the validation split of prepare-prefeval).")
    return rows


def write_rows(path: str, rows: Sequence[dict]) -> None:
    """Write JSONL atomically (temporary file, rename)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(target)


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
        settings = {**self.settings, **(settings or {})}
        steps = {**RLAC_STEPS, **(settings.get("phase_steps") or {})}
        overrides = settings.get("phase_overrides") or {}
        return [
            PhaseSpec("generator", "generator", "rlac_generator", partner_role="critic",
                      max_steps=int(steps["generator"]), overrides=dict(overrides.get("generator", {})),
                      build_in_process=True),
            PhaseSpec("critic", "critic", "rlac_critic", partner_role=None, max_steps=int(steps["critic"]),
                      overrides=dict(overrides.get("critic", {}))),
        ]

    def build_data(self, ctx: BuildContext) -> dict:
        from ..methods.rlac import generator_rows, pick_clips

        if ctx.phase.name == "generator":
            rows = load_corpus(ctx.train_file, self.settings.get("hba_task"))
            size = self.settings.get("corpus_size")
            rows = pick_clips(rows, size, ctx.seed) if size else rows
            write_rows(ctx.output_file, generator_rows(rows))
            return {"rows": len(rows)}
        return harvest(ctx, int(self.settings.get("max_pairs") or 600))


def harvest(ctx: BuildContext, max_pairs: int) -> dict:
    """P_{t+1}: one response per clip from the new generator (sampled at its rollout temperature / top-p), at most
    `max_pairs` clips (seeded), written as critic rows. Runs in the build process (it loads the generator)."""
    from ..data.jsonl import read_jsonl
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
    print(f"harvest: {ctx.checkpoints['generator']} loaded ({backend}) in {time.monotonic() - start:.1f} s",
          flush=True)
    start = time.monotonic()
    prompts = [_prompt(r, script_args, training_args) for r in rows]
    if hasattr(generator, "sample"):
        spec = Sampling(temperature=training_args.temperature, top_p=training_args.top_p or 1.0,
                        top_k=training_args.top_k or 0, seed=ctx.seed + ctx.round)
        responses = [s[0].text for s in generator.sample(prompts, [spec])]
    else:  # the vision-language generator decodes greedily
        responses = generator(prompts)
    print(f"harvest: {len(responses)} responses of at most {max_new} tokens in {time.monotonic() - start:.1f} s",
          flush=True)
    out = critic_rows(rows, responses)
    write_rows(ctx.output_file, out)
    return {"pairs": len(out), "clips": len(generated), "max_pairs": max_pairs}


def _prompt(row: dict, script_args, training_args) -> list[dict]:
    if row.get("videos"):
        from ..data.hba import expand_videos

        return expand_videos(row, script_args.media_root, **training_args.frame_kwargs())["prompt"]
    return row["prompt"]


#: `--method` name -> `module:Class`.
METHODS = {
    "rlac": "rlce_trl.coevolution.registry:RLAC",
    "visplay": "rlce_trl.coevolution.selfplay_methods:VisPlay",
    "video_zero": "rlce_trl.coevolution.selfplay_methods:VideoZero",
}


def get_method(name: str, settings: dict | None = None) -> CoevolutionMethod:
    """The method `name`, built with the recipe's `coevolve_*` settings; an `InputError` naming the methods."""
    if name not in METHODS:
        raise InputError(f"--method {name!r}: use one of {', '.join(METHODS)}.")
    module_name, _, attr = METHODS[name].partition(":")
    return getattr(importlib.import_module(module_name), attr)(settings)
