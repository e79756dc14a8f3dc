"""`rlce-trl report RUN_DIR`: a self-contained HTML page and PNG plots of a training run ([`rlce_trl.report`])."""

from __future__ import annotations

import argparse
import os

from ..errors import InputError, output_dir_error, raise_problems
from ._args import positive_int


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "report",
        help="Write a self-contained HTML page (curves, groups and their evidence, completions) and PNG plots.",
        description="Report on a training run: curves over steps from trainer_state.json, a browser of the rollout "
        "groups of rlce_evidence.jsonl with their tests and verdicts, and the completions tables. Writes "
        "RUN_DIR/report/index.html and PNG plots beside it; the page needs no network access.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="The output_dir of a training run.")
    parser.add_argument("--output_dir", default=None, help="Folder of the page and plots (default RUN_DIR/report).")
    parser.add_argument("--max_groups", type=positive_int, default=5000, help="Newest groups embedded in the page.")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from ..report import build_report
    from ..report.plots import CURVES_PNG

    raise_problems([args.output_dir and output_dir_error(args.output_dir)])
    try:
        path, data = build_report(args.run_dir, args.output_dir, args.max_groups)
    except FileNotFoundError as error:
        raise InputError(str(error)) from None
    for note in data.notes:
        print(f"note: {note}")
    pngs = os.path.join(os.path.dirname(path), CURVES_PNG)
    print(f"wrote {path}" + (f" and {pngs}" if os.path.exists(pngs) else ""))
    return 0
