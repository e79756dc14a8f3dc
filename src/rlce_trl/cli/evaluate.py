"""`rlce-trl evaluate`'s flags and entry point (the loop is in `rlce_trl.evaluation.evaluate`).

Everything the user gives is checked before a model is loaded: flags, the data file and its rows, the PrefEval
folder, the judge settings; a problem is one [`~rlce_trl.errors.InputError`] that names the fix.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..data.hba import load_hba_split
from ..data.jsonl import read_jsonl_counted
from ..data.prefeval import FORMS as PREFEVAL_FORMS
from ..data.sample import load_preference_sample
from ..data.tasks import judge_of, load_task, plain_rows, video_tasks
from ..errors import InputError, MissingInputError, first_line, output_dir_error, raise_problems
from ..evaluation.evaluate import Judge, check_eval_rows, evaluate_prefeval_forms, evaluate_rows
from ..evaluation.judges import OpenAIJudgeClient, judge_url_problem, load_prefeval_judge_prompts
from ..generation.generators import BACKENDS, Generator, make_generator
from ..models import ALIAS_NAMES as ALIASES
from ..models import check_model_source, resolve_model
from ._args import DTYPES, check_video_rows, json_object, positive_int
from ._prompting import add_config_argument, resolve_prompting, say_prompting


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model_name_or_path", required=True,
                        help=f"Checkpoint to evaluate: a local folder, a Hub id, or an offline model ({ALIASES}).")
    parser.add_argument("--data", default=None,
                        help="A split as JSONL (rows with `prompt` and `gold`; `id` and `task` optional: without "
                        "`task` the rows are scored by accuracy over their `answer_options`, else by exact match, or "
                        "by the judge when one is given), the folder written by `rlce-trl prepare-prefeval` (all "
                        "three forms, macro average), or `sample` for the bundled preference sample's test split.")
    parser.add_argument("--task", default=None,
                        help="Your own task file (YAML): evaluate its --split with its metric (instead of --data).")
    parser.add_argument("--split", default="test", help="Split to read from a prepare-prefeval folder or --task.")
    add_config_argument(parser)
    parser.add_argument("--output_dir", required=True, help="Where predictions.jsonl and summary.json go.")
    parser.add_argument("--hba_task", default=None, choices=sorted(video_tasks()),
                        help="Read --data as a Human Behavior Atlas split (`problem`, `answer`, `videos`) of this "
                        "task.")
    parser.add_argument("--media_root", default=None, help="Folder the `videos` paths of HBA rows are relative to.")
    parser.add_argument("--backend", default="auto", choices=list(BACKENDS),
                        help="auto: vLLM when installed, transformers otherwise; video rows always use transformers.")
    parser.add_argument("--dtype", default="auto", choices=DTYPES,
                        help="Weights dtype (auto: bfloat16 on GPU, float32 on CPU).")
    parser.add_argument("--vllm_kwargs", type=json_object, default=None,
                        help='JSON object passed to vllm.LLM, e.g. \'{"max_model_len": 8192, '
                        '"gpu_memory_utilization": 0.8}\'.')
    parser.add_argument("--max_new_tokens", type=positive_int, default=512, help="Most tokens generated per answer.")
    parser.add_argument("--batch_size", type=positive_int, default=None,
                        help="Rows per generation call (and per write and progress step); default 8 on a GPU, 1 on "
                        "CPU (progress row by row).")
    parser.add_argument("--limit", type=positive_int, default=None,
                        help="Evaluate only the first N rows (smoke tests).")
    parser.add_argument("--judge_base_url", default=None, help="OpenAI-compatible judge endpoint, e.g. .../v1.")
    parser.add_argument("--judge_model", default=None, help="Model name at the judge endpoint.")
    parser.add_argument("--judge_api_key_env", default="OPENAI_API_KEY",
                        help="Environment variable holding the judge's API key.")
    parser.add_argument("--judge_concurrency", type=positive_int, default=8, help="Judge requests in flight at most.")
    parser.add_argument("--judge_deadline", type=float, default=300.0,
                        help="Overall deadline of one judge request, retries and the whole reply included (s).")
    parser.add_argument("--judge_max_reply_bytes", type=int, default=1_000_000, help="Largest judge reply accepted.")
    parser.add_argument("--prefeval_dir", default=None, help="PrefEval checkout for the judge prompts.")
    parser.add_argument("--no_progress", action="store_true", help="Hide the progress bar.")


def check_flags(args: argparse.Namespace) -> None:
    """Every flag problem at once, as one [`InputError`]."""
    problems = []
    if args.batch_size is None:
        import torch

        args.batch_size = 8 if torch.cuda.is_available() else 1
    if args.judge_max_reply_bytes < 64:  # the counts are checked by their argparse types
        problems.append(f"--judge_max_reply_bytes {args.judge_max_reply_bytes}: use 64 or more")
    if args.judge_deadline <= 0:
        problems.append(f"--judge_deadline {args.judge_deadline}: use a positive number of seconds")
    if (args.data is None) == (args.task is None):
        problems.append("pass --data (a split) or --task (your task file), one of them")
    if args.judge_base_url and not args.judge_model:
        problems.append("--judge_base_url needs --judge_model (the model name at the judge endpoint)")
    raise_problems([*problems, judge_url_problem(args.judge_base_url), output_dir_error(args.output_dir)])


def _read_rows(args: argparse.Namespace) -> list[dict] | None:
    """The rows of a single-file --data (checked), or `None` for `sample` / a PrefEval folder."""
    if args.task:
        if args.hba_task:
            raise InputError("--task and --hba_task: pass one of them.")
        rows = load_task(args.task).rows(args.split, with_gold=True)[: args.limit]
        check_eval_rows(rows, f"--task {args.task}")
        return rows
    data = Path(args.data)
    if args.hba_task:
        if not data.is_file():
            raise MissingInputError(f"--data {args.data!r} is not a file: pass an HBA split as JSONL.")
        rows = load_hba_split(data, args.hba_task, split="test")[: args.limit]
    elif args.data == "sample":
        rows = load_preference_sample("test")[: args.limit]
    elif data.is_dir():
        missing = [form for form in PREFEVAL_FORMS if not (data / form / f"{args.split}.jsonl").is_file()]
        if missing:
            raise MissingInputError(f"{data} has no {missing[0]}/{args.split}.jsonl: run `rlce-trl prepare-prefeval` "
                                    "first (or pass a JSONL split).")
        if args.limit is not None:
            raise InputError("--limit applies to a single JSONL split, not to a PrefEval folder: drop --limit.")
        for form in PREFEVAL_FORMS:
            path = data / form / f"{args.split}.jsonl"
            check_eval_rows(read_jsonl_counted(path, "PrefEval split")[0], str(path))
        return None
    else:
        rows, skipped = read_jsonl_counted(data, "--data file")
        if skipped:
            print(f"warning: {data}: skipped an unreadable last line (cut short?)", file=sys.stderr)
        if rows and "prompt" not in rows[0] and "problem" in rows[0]:
            raise InputError("these look like raw HBA rows (`problem`, no `prompt`): pass --hba_task.")
        rows = plain_rows(rows[: args.limit], data.name, judged=bool(args.judge_base_url))
    check_eval_rows(rows, f"--data {args.data}")
    return rows


def main(args: argparse.Namespace, generator: Generator | None = None) -> int:
    check_flags(args)
    rows = _read_rows(args)
    prompting, source = resolve_prompting(args.config, args.model_name_or_path)
    if rows is not None:
        from ..training.pipeline import policy_rows  # (imports transformers: only once the flags are checked)

        rows = policy_rows(rows, prompting)  # exactly the training prompt (suffix, answer instruction, method)
    elif source is not None and (prompting.prompt_suffix or prompting.reward_method not in (None, "rlce")):
        print(f"warning: a PrefEval folder is evaluated on its prompts as built: the training prompting of {source} "
              "is not applied; evaluate a prepared split file (--data <folder>/<form>/<split>.jsonl) for that.",
              file=sys.stderr)
    say_prompting(prompting, source)
    judge = None
    if args.judge_base_url:
        client = OpenAIJudgeClient(args.judge_base_url, args.judge_model, api_key_env=args.judge_api_key_env,
                                   concurrency=args.judge_concurrency, deadline=args.judge_deadline,
                                   max_reply_bytes=args.judge_max_reply_bytes)
        prefeval = args.prefeval_dir or rows is None or any(judge_of(r["task"]) == "prefeval_checks" for r in rows)
        # the judge prompts load now: a missing checkout fails before the first generated batch
        judge = Judge(client, load_prefeval_judge_prompts(args.prefeval_dir) if prefeval else None)
    video = bool(rows) and any(r.get("videos") for r in rows)
    if video:
        check_video_rows(rows, args.media_root)
    if generator is None:
        args.model_name_or_path = resolve_model(args.model_name_or_path)  # an offline alias: its converted folder
        check_model_source(args.model_name_or_path, "--model_name_or_path")
        try:
            generator = make_generator(args.model_name_or_path, args.backend, video=video,
                                       max_new_tokens=args.max_new_tokens, batch_size=args.batch_size,
                                       dtype=args.dtype, vllm_kwargs=args.vllm_kwargs)
        except OSError as error:  # transformers: not a checkpoint, missing files, no network for a Hub id
            first = first_line(error)
            raise MissingInputError(f"cannot load --model_name_or_path {args.model_name_or_path!r} ({first}): pass "
                                    "a local checkpoint folder.") from None
    if source is not None and hasattr(generator, "chat_template_kwargs"):
        generator.chat_template_kwargs = dict(prompting.chat_template_kwargs or {})  # as TRL rendered in training
    print(f"writing {Path(args.output_dir) / 'predictions.jsonl'} and summary.json ({len(rows) if rows else 'all'} "
          f"rows, {args.batch_size} per step)", file=sys.stderr, flush=True)
    kwargs = {"judge": judge, "batch_size": args.batch_size, "progress": not args.no_progress}
    if rows is not None:
        summary = evaluate_rows(rows, generator, args.output_dir, media_root=args.media_root, **kwargs)
    else:
        summary = evaluate_prefeval_forms(Path(args.data), args.split, generator, args.output_dir, **kwargs)
    print(json.dumps({k: v for k, v in summary.items() if k != "forms"}, indent=2))
    for form, s in summary.get("forms", {}).items():
        print(f"{form:<10} {s['score']}")
    out = Path(args.output_dir)
    print(f"Predictions (with the prompt of each row): {out / 'predictions.jsonl'}; summary: {out / 'summary.json'}",
          file=sys.stderr)
    return 0


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="Greedy generation of a checkpoint on a split, answer extraction and scoring (appendix A protocol).",
        description="Evaluate a checkpoint on a split with the paper's protocol. Writes per-row JSONL and a summary "
        "JSON as it goes; rerunning the same command resumes.",
    )
    add_arguments(parser)
    parser.set_defaults(func=main)
