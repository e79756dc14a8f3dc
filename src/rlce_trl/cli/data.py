"""`rlce-trl prepare-prefeval`: build the PrefEval splits of the paper (appendix A) from a local checkout."""

from __future__ import annotations

import argparse

from ..data.prefeval import DEFAULT_SEED, prepare_prefeval


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "prepare-prefeval",
        help="Build the PrefEval explicit / choice / persona splits (GRPO-ready JSONL) from a local checkout.",
        description="Build the PrefEval splits of the paper (appendix A) from a local checkout of "
        "https://github.com/amazon-science/PrefEval and write OUTPUT_DIR/<form>/<split>.jsonl.",
    )
    parser.add_argument("--prefeval_dir", default=None, help="PrefEval checkout (default: $PREFEVAL_DIR).")
    parser.add_argument("--output_dir", required=True, help="Where to write the splits.")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help=f"Seed of the padding draw and the split (default {DEFAULT_SEED}).")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    counts = prepare_prefeval(args.prefeval_dir, args.output_dir, seed=args.seed)
    splits = list(next(iter(counts.values())))
    print(f"{'form':<10}" + "".join(f"{split:>12}" for split in splits))
    for form, by_split in counts.items():
        print(f"{form:<10}" + "".join(f"{by_split[split]:>12}" for split in splits))
    print(f"wrote {args.output_dir}/<form>/<split>.jsonl")
    return 0
