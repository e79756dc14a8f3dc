"""`rlce-trl select` (next-capabilities §3.2): run selectors over a pool sampled by `rlce-trl sample` at several
budgets; accuracy, paired CIs against majority, costs; resumable."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from ..data.jsonl import read_json, read_jsonl, write_json
from ..data.prompts import Prompting
from ..data.tasks import load_task
from ..errors import InputError, MissingInputError, output_dir_error, positive_int, raise_problems
from ..models import resolve_model
from ._prompting import add_config_argument, resolve_prompting

DEFAULT_SELECTORS = "greedy,single,majority,elect,elect_noframes,oracle"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pool", required=True, help="A folder written by `rlce-trl sample` (or a pool.jsonl).")
    parser.add_argument("--output_dir", required=True,
                        help="Folder of selections.jsonl, summary.json and summary.md; rerunning resumes it.")
    parser.add_argument("--task", default=None,
                        help="Your own task file (YAML) the pool was sampled from (`rlce-trl sample --task`): the "
                        "pool's rows are checked against it (task, labels, gold, and the prompt: the training "
                        "prompt of --config, else the one the pool was sampled with) and the summary names it.")
    add_config_argument(parser)
    parser.add_argument("--selectors", default=DEFAULT_SELECTORS,
                        help="Comma-separated: greedy, single, majority, usc, policy_judge, rlce, elect, "
                        f"elect_noframes, oracle (default {DEFAULT_SELECTORS}).")
    parser.add_argument("--budgets", default=None, help="Comma-separated b values (default 1,2,..,n).")
    parser.add_argument("--subsets", type=positive_int, default=5, help="Seeded random b-subsets per row when b < n.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the b-subsets.")
    parser.add_argument("--verifier_model_name_or_path", default=None,
                        help="Verifier of rlce / usc / policy_judge and Elect's referee: the BASE model (`smollm2`).")
    parser.add_argument("--rlce_tests_per_direction", type=positive_int, default=1,
                        help="rlce: tests per direction of each pairwise comparison.")
    parser.add_argument("--rlce_max_tokens", type=positive_int, default=128,
                        help="Longest evidence test the verifier writes, in tokens (the paper's 128).")
    parser.add_argument("--elect_referee", choices=("on", "off"), default="off",
                        help="elect: the referee check of Eq. 19 (needs --verifier_model_name_or_path).")
    parser.add_argument("--elect_trim", choices=("paper", "min4", "none"), default="paper",
                        help="elect: drop the highest and lowest score per cluster (paper: clusters of 3 or more; "
                        "min4: of 4 or more; none: never).")
    parser.add_argument("--elect_delta", type=float, default=0.08,
                        help="elect: stop when the margin exceeds this (the paper: 0.08).")
    parser.add_argument("--elect_gamma", type=float, default=0.4,
                        help="elect: and the leader's mean confidence exceeds this (the paper: 0.4).")
    parser.add_argument("--elect_think_range", default="64,1024", help="L clip range of tau, in tokens.")
    parser.add_argument("--chunk_size", type=positive_int, default=16,
                        help="Rows selected between two writes (the resume granularity).")


def _load_verifier(name: str, video: bool):
    """The frozen base model as the selectors' verifier: a vision-language verifier that sees each row's clip when
    the pool has video rows, the text backend otherwise."""
    path = resolve_model(name)
    if not Path(path).is_dir():
        raise MissingInputError(f"--verifier_model_name_or_path {name!r} is not a folder: pass a local checkpoint "
                                "folder (or `smollm2`).")
    if video:
        from ..generation.hf import check_vision_language
        from ..verifiers.vlm_backend import VisionLanguageVerifier, load_frozen_vlm

        check_vision_language(path, f"--verifier_model_name_or_path {name!r}", "this pool holds video rows")
        return VisionLanguageVerifier(*load_frozen_vlm(path, dtype="float32"))
    from ..verifiers.transformers_backend import TransformersVerifier, load_frozen_model

    return TransformersVerifier(*load_frozen_model(path, dtype="float32"))


def _int_list(text: str, flag: str, example: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values:
        raise InputError(f"{flag} {text!r}: give comma-separated integers, e.g. {example}")
    return values


def _select_config(args):
    """The Elect config and the budgets from the flags; every flag problem at once, as one [`InputError`]."""
    from ..elect.election import ElectConfig
    from ..selection import known_selectors, selector_name_problem

    problems = []  # the counts are checked by their argparse types
    if not args.elect_delta >= 0:
        problems.append(f"--elect_delta {args.elect_delta}: use 0 or more (the paper: 0.08)")
    if not 0 <= args.elect_gamma <= 1:
        problems.append(f"--elect_gamma {args.elect_gamma}: use a value in [0, 1] (the paper: 0.4)")
    names = list(dict.fromkeys(s.strip() for s in args.selectors.split(",") if s.strip()))
    unknown = [n for n in names if selector_name_problem(n)]
    if not names or unknown:
        problems.append(f"--selectors {args.selectors!r}: {'unknown ' + ', '.join(unknown) if unknown else 'empty'}; "
                        f"choose from {', '.join(known_selectors())}")
    budgets = sorted(set(_int_list(args.budgets, "--budgets", "1,2,4"))) if args.budgets else None
    if budgets and budgets[0] < 1:
        problems.append(f"--budgets {args.budgets}: budgets are candidate counts, use 1 or more")
    think = _int_list(args.elect_think_range, "--elect_think_range", "64,1024")
    if len(think) != 2:
        problems.append(f"--elect_think_range {args.elect_think_range!r}: give LO,HI in tokens, e.g. 64,1024")
    if error := output_dir_error(args.output_dir):
        problems.append(error)
    cfg = None
    if not problems:
        try:
            cfg = ElectConfig(trim=args.elect_trim, delta=args.elect_delta, gamma=args.elect_gamma,
                              think_range=(think[0], think[1]))
        except ValueError as error:
            problems.append(" ".join(str(error).replace("Invalid ElectConfig:", "").split()).lstrip("- "))
    raise_problems(problems)
    return cfg, budgets, names


def _check_resume(args, out: Path) -> Path:
    """A rerun resumes the rows not yet in selections.jsonl; with other selection settings it would mix two runs.
    Returns the settings file, written by the caller once the selectors are built."""
    from ..selection.pool import check_resume_settings

    keys = ("selectors", "budgets", "subsets", "seed", "rlce_tests_per_direction", "rlce_max_tokens",
            "elect_referee", "elect_trim", "elect_delta", "elect_gamma", "elect_think_range",
            "verifier_model_name_or_path")
    settings = {k: getattr(args, k) for k in keys}
    path = out / "select_settings.json"
    selections = out / "selections.jsonl"
    if selections.exists() and selections.stat().st_size:
        check_resume_settings(path, settings, "selections made")
    args.select_settings = settings
    return path


def _check_task(path: str, rows, config: str | None = None, pool: str | None = None) -> dict:
    """The task file the pool was sampled from, checked against the pool's rows: every row of that task, with its
    labels (or none, for free text), a gold answer and the training prompt (the task's prompt as `--config`'s recipe
    prompts it, else with the prompting the pool was sampled with); a judge-scored task is refused (a selection
    is scored by matching its answer with the gold). Returns the summary's `task` entry."""
    task_file = load_task(path)
    task = task_file.task
    others = sorted({r.task or "(none)" for r in rows if r.task != task.name})
    if others:
        raise InputError(f"--pool holds rows of task {', '.join(others)}, not {task.name} (--task {path}): sample "
                         f"the pool with `rlce-trl sample --task {path}`.")
    if task.needs_judge:
        raise InputError(f"--task {path}: {task.name} is scored by an LLM judge (metric judge_accuracy); select "
                         "scores a selection by matching its answer with the gold: use metric exact_match, or "
                         "labels.")
    for row in rows:
        if row.gold is None:
            raise InputError(f"--pool row {row.id} has no gold: sample it with `rlce-trl sample --task {path}` (which "
                             "keeps the test split's gold).")
        if (tuple(row.labels) if row.labels else None) != task.labels:
            raise InputError(f"--pool row {row.id} has the answer options {', '.join(row.labels or ()) or 'none'}, "
                             f"not the task's {', '.join(task.labels or ()) or 'none (free text)'}: sample the pool "
                             "with this task file.")
    _check_prompts(task_file, rows, config, pool)
    return {"name": task.name, "display_name": task.display_name, "metric": task.metric}


def _check_prompts(task_file, rows, config: str | None, pool: str | None) -> None:
    """Every pool row's prompt is the task row's training prompt ([`policy_rows`]) under `--config`'s prompting, else
    the prompting the pool records (`rlce-trl sample --config` / a trained model's record), else none."""
    from ..selection.pool import SETTINGS_FILE
    from ..training.pipeline import policy_rows

    prompting, source = resolve_prompting(config, None)
    if source is None and pool is not None:
        settings = Path(pool) / SETTINGS_FILE if Path(pool).is_dir() else Path(pool).parent / SETTINGS_FILE
        recorded = (read_json(settings) or {}).get("prompting")
        if isinstance(recorded, dict):
            prompting, source = Prompting.from_dict(recorded), str(settings)
    from datasets.utils.logging import disable_progress_bar, enable_progress_bar, is_progress_bar_enabled

    expected, was_enabled = {}, is_progress_bar_enabled()
    disable_progress_bar()  # reading the task's small files is no progress worth a bar on stderr
    try:
        for split in task_file.splits():
            expected.update({str(r["id"]): r["prompt"]
                             for r in policy_rows(task_file.rows(split, with_gold=False), prompting)})
    finally:
        if was_enabled:
            enable_progress_bar()
    for row in rows:
        want = expected.get(str(row.id))
        if want is not None and row.prompt != want:
            where = f"the prompting of {source}" if source else "no recipe's prompting"
            raise InputError(f"--pool row {row.id} was sampled with another prompt than the task's training prompt "
                             f"({where}): sample the pool with `rlce-trl sample --task {task_file.path} --config "
                             "<the training recipe>` (or from the trained model's folder), or pass the recipe that "
                             "prompted it as --config.")


def main(args: argparse.Namespace, verifier=None) -> int:
    from ..data.media import media_items
    from ..evidence.pipeline import EvidenceSettings
    from ..selection import format_table, make_selector, needs_verifier, read_pool, select_rows, summarize
    from ..selection.protocol import pool_stats

    cfg, budgets, names = _select_config(args)
    rows, problems = read_pool(args.pool)
    if not rows:
        raise InputError(f"no readable rows in {args.pool} ({len(problems)} unreadable lines"
                         + (f", first: {problems[0]}" if problems else "") + "): sample one with `rlce-trl sample`.")
    task = _check_task(args.task, rows, args.config, args.pool) if args.task else None
    sizes = sorted({len(r.candidates) for r in rows})
    if max(sizes) == 0:
        raise InputError(f"no row of {args.pool} has candidates: sample them with `rlce-trl sample`.")
    budgets = budgets or list(range(1, max(sizes) + 1))
    if budgets[-1] > max(sizes):
        raise InputError(f"--budgets {args.budgets}: no row has {budgets[-1]} candidates (pool sizes {sizes}); "
                         "use budgets up to the largest pool.")
    needs = [n for n in names if needs_verifier(n)] or (args.elect_referee == "on" and names)
    if verifier is None and needs and not args.verifier_model_name_or_path:
        raise InputError(f"selectors {needs} need --verifier_model_name_or_path (the base model)")
    settings_path = _check_resume(args, Path(args.output_dir))
    if verifier is None and needs:
        verifier = _load_verifier(args.verifier_model_name_or_path, video=any(media_items(r.prompt) for r in rows))
    tokenizer = getattr(verifier, "tokenizer", None)
    settings = EvidenceSettings(tests_per_direction=args.rlce_tests_per_direction,
                                construction_sampling=dataclasses.replace(EvidenceSettings.construction_sampling,
                                                                          max_tokens=args.rlce_max_tokens))
    try:
        selectors = [make_selector(n, verifier, cfg, settings, referee=args.elect_referee == "on", tokenizer=tokenizer)
                     for n in names]
    except ValueError as error:
        raise InputError(str(error)) from None
    write_json(args.select_settings, settings_path)
    path = select_rows(rows, selectors, budgets, args.output_dir, args.subsets, args.seed, args.chunk_size)
    summary = summarize(read_jsonl(path, "selections file"))
    stats = pool_stats(rows, cfg.think_range, cfg.ngram)
    summary.update(unreadable_pool_lines=problems, pool_sizes=sizes, pool_stats=stats)
    if task:
        summary["task"] = task
    out = Path(args.output_dir)
    write_json(summary, out / "summary.json")
    table = format_table(summary)
    (out / "summary.md").write_text(table + "\n")
    print(table)
    if task:
        print(f"task {task['display_name']} ({task['name']}): a selection is correct when its answer matches the "
              "gold")
    print(f"rows {summary['rows']}, candidates {summary['candidates']}, without an answer "
          f"{summary['unparsed_candidates']}, unreadable pool lines {len(problems)}, pool sizes {sizes}")
    for name, failed in summary.get("selector_failures", {}).items():
        print(f"selector {name} failed on {failed['rows']} rows (majority answer used, status error); first: "
              f"{failed['first']}")
    short = {}  # per budget, the rows whose pool is smaller than it (the same for every selector)
    for s in summary["selectors"].values():
        short.update({b: max(short.get(b, 0), m["rows_short"]) for b, m in s["budgets"].items() if m["rows_short"]})
    if short:
        print("rows with fewer candidates than a budget (skipped for it): "
              + ", ".join(f"b={b}: {n}" for b, n in short.items()))
    print("pool: " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                               for k, v in summary["pool_stats"].items()))
    return 0


def add_parser(subparsers) -> None:
    text = ("Run selectors (majority, rlce, elect, ...) over a sampled pool at several budgets; accuracy, paired CIs "
            "against majority, costs; resumable.")
    parser = subparsers.add_parser("select", help=text, description=text)
    add_arguments(parser)
    parser.set_defaults(func=main)
