"""`rlce-trl sample` and `rlce-trl select` (next-capabilities §3.2): argument parsers and entry points."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..data.jsonl import read_jsonl

DEFAULT_SELECTORS = "greedy,single,majority,elect,elect_noframes,oracle"


def _load_rows(args) -> list[dict]:
    if args.synthetic:
        from ..data.synthetic import numbered_evidence

        return numbered_evidence(args.synthetic, seed=args.seed, style=args.style)
    from ..data.jsonl import read_jsonl

    return read_jsonl(args.data)


def add_sample_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model_name_or_path", required=True,
                        help="Checkpoint folder; `smollm2` for the packaged SmolLM2-135M-Instruct.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", help="JSONL rows with id, prompt, answer_options (and gold for scoring).")
    source.add_argument("--synthetic", type=int, metavar="N", help="N rows of the numbered-evidence task.")
    parser.add_argument("--style", default="elect", choices=("elect", "boxed"), help="Synthetic prompt style.")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--n", type=int, default=4, help="Sampled candidates per row (plus the greedy one).")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top_p", type=float, default=0.95)
    parser.add_argument("--top_k", type=int, default=20)
    parser.add_argument("--no_greedy", action="store_true", help="Do not add the greedy (temperature 0) candidate.")
    parser.add_argument("--max_new_tokens", type=int, default=256)
    parser.add_argument("--limit", type=int, default=None, help="Only the first N rows.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="transformers", choices=("transformers", "vllm"))
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--vllm_kwargs", default=None,
                        help='JSON of vllm.LLM arguments, e.g. \'{"max_model_len": 1024, "enforce_eager": true}\'')


def main_sample(args: argparse.Namespace, sampler=None) -> int:
    from ..selection.pool import sample_pool

    problems = []
    if args.n < 1:
        problems.append(f"--n {args.n}: use 1 or more")
    if not 0 < args.top_p <= 1:
        problems.append(f"--top_p {args.top_p}: use a value in (0, 1]")
    if args.temperature <= 0:
        problems.append(f"--temperature {args.temperature}: use a positive value (the greedy run is added separately)")
    if args.data and not Path(args.data).exists():
        problems.append(f"--data {args.data}: no such file")
    if problems:
        print("error: " + "; ".join(problems), file=sys.stderr)
        return 2
    rows = _load_rows(args)[: args.limit]
    if sampler is None:
        path = args.model_name_or_path
        if path == "smollm2":
            from ..models import smollm2_instruct

            path = smollm2_instruct()
        from ..evaluation.generation import TransformersGenerator, VLLMGenerator

        if args.backend == "vllm":
            kwargs = json.loads(args.vllm_kwargs) if args.vllm_kwargs else {}
            if args.dtype != "auto":
                kwargs.setdefault("dtype", args.dtype)
            sampler = VLLMGenerator(path, max_new_tokens=args.max_new_tokens, **kwargs).sample
        else:
            sampler = TransformersGenerator.from_pretrained(path, args.max_new_tokens, dtype=args.dtype).sample
    try:
        counts = sample_pool(rows, sampler, args.output_dir, n=args.n, temperature=args.temperature,
                             top_p=args.top_p, top_k=args.top_k, seed=args.seed, greedy_too=not args.no_greedy,
                             settings_extra={"model": args.model_name_or_path, "max_new_tokens": args.max_new_tokens,
                                             "backend": args.backend})
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
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
    parser.add_argument("--elect_referee", choices=("on", "off"), default="off")
    parser.add_argument("--elect_trim", choices=("paper", "min4", "none"), default="paper")
    parser.add_argument("--elect_delta", type=float, default=0.08)
    parser.add_argument("--elect_gamma", type=float, default=0.4)
    parser.add_argument("--elect_think_range", default="64,1024", help="L clip range of tau, in tokens.")
    parser.add_argument("--chunk_size", type=int, default=16)


def main_select(args: argparse.Namespace, verifier=None) -> int:
    from ..elect.election import ElectConfig
    from ..evidence.pipeline import EvidenceSettings
    from . import format_table, make_selector, read_pool, select_rows, summarize
    from .protocol import pool_stats

    try:
        rows, problems = read_pool(args.pool)
    except FileNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    names = [s.strip() for s in args.selectors.split(",") if s.strip()]
    sizes = sorted({len(r.candidates) for r in rows})
    try:
        budgets = sorted({int(b) for b in args.budgets.split(",")}) if args.budgets else list(range(1, max(sizes) + 1))
        lo, hi = (int(x) for x in args.elect_think_range.split(","))
        cfg = ElectConfig(trim=args.elect_trim, delta=args.elect_delta, gamma=args.elect_gamma, think_range=(lo, hi))
    except ValueError as error:
        print(f"error: {error} (--budgets 1,2,4; --elect_think_range LO,HI)", file=sys.stderr)
        return 2
    if not rows:
        print(f"error: no readable rows in {args.pool} ({len(problems)} unreadable lines)", file=sys.stderr)
        return 2
    needs_verifier = [n for n in names if n not in ("greedy", "single", "majority", "oracle", "elect",
                                                   "elect_noframes")] or (args.elect_referee == "on" and names)
    tokenizer = None
    if verifier is None and needs_verifier:
        if not args.verifier_model_name_or_path:
            print(f"error: selectors {needs_verifier} need --verifier_model_name_or_path (the base model)",
                  file=sys.stderr)
            return 2
        path = args.verifier_model_name_or_path
        if path == "smollm2":
            from ..models import smollm2_instruct

            path = smollm2_instruct()
        from ..verifiers.transformers_backend import TransformersVerifier, load_frozen_model

        verifier = TransformersVerifier(*load_frozen_model(path, dtype="float32"))
    if verifier is not None:
        tokenizer = getattr(verifier, "tokenizer", None)
    settings = EvidenceSettings(tests_per_direction=args.rlce_tests_per_direction)
    try:
        selectors = [make_selector(n, verifier, cfg, settings, referee=args.elect_referee == "on", tokenizer=tokenizer)
                     for n in names]
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
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
    print("pool: " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                               for k, v in summary["pool_stats"].items()))
    return 0
