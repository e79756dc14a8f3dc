"""`rlce-trl compare`: the paper's Table 1 for one task (logic in `rlce_trl.comparison`)."""

from __future__ import annotations


def add_parser(subparsers) -> None:
    from ..comparison.command import add_arguments, main

    text = ("The paper's comparison for one task: train every (method, seed), test each best-on-validation "
            "checkpoint, write Table 1's shape; resumable.")
    parser = subparsers.add_parser("compare", help=text, description=text)
    add_arguments(parser)
    parser.set_defaults(func=main)
