"""The `rlce-trl` command line: `rlce-trl <command> [--flags]` (also `python -m rlce_trl.cli`).

One module per command group, in the shape of TRL's `trl/cli/commands/`: each has `add_parser(subparsers)`, which
creates its parser and sets `func` (a function of the parsed arguments returning an exit code), and is listed in
`COMMANDS`. Heavy imports go inside the functions, so that `rlce-trl --help` stays fast. Only argument parsing and
command glue live here; what other modules import stays in its feature package, and no feature package imports
`rlce_trl.cli`.

Commands that pass further `--key value` pairs on to a recipe (`train`, `coevolve`) set `accepts_extra`: they get the
arguments their parser does not know as `args.extra`; for every other command those are an argparse error.

One dialect: snake_case flags, `--output_dir` for folders and `--output_file` for files. Every parser is a
[`~rlce_trl.cli._args.CLIParser`]: a bad value or a missing flag is one line, an unknown flag prints that command's
usage and the closest flag ("did you mean"); counts use the `positive_int` type.

Bad input ends in one line: a command raises [`~rlce_trl.errors.InputError`] (or the verifier's
`VerifierUnavailableError`) with a message that names the fix, and [`main`] prints `error: <message>` (scrubbed of
credentials) and returns 2. Any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..credentials import scrub_message
from ..errors import InputError, interrupt_message, leave_process_group, print_error, watch_interrupts
from . import analyze, calibrate, check, coevolve, compare, data, env, evaluate, report, sample, select, train
from ._args import CLIParser, check_unknown_flags, leaf_parser

#: The command groups, in the order of `rlce-trl --help`.
COMMANDS = [data, evaluate, analyze, report, sample, select, calibrate, check, train, coevolve, compare, env]


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = CLIParser(prog="rlce-trl", description="RLCE rewards for TRL's GRPOTrainer.")
    parser.add_argument("--version", action="version", version=f"rlce-trl {__version__}",
                        help="Print the package version and exit.")
    subparsers = parser.add_subparsers(dest="command", metavar="<command>", parser_class=CLIParser)
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from ..verifiers.base import VerifierUnavailableError

    watch_interrupts()  # a Ctrl-C while models load ends the run even if a library swallows it
    try:
        argv = [os.fspath(a) if isinstance(a, os.PathLike) else a for a in argv]
        parser = build_parser()
        check_unknown_flags(parser, argv)
        args, extra = parser.parse_known_args(argv)
        if extra and not getattr(args, "accepts_extra", False):
            raise leaf_parser(parser, args).unknown(extra)
        args.extra = extra
        if not getattr(args, "func", None):
            parser.print_help()
            return 1
        return args.func(args)
    except (InputError, VerifierUnavailableError) as error:  # bad input: one line naming the fix (on every rank)
        leave_process_group()
        print_error(scrub_message(error))
        return 2
    except KeyboardInterrupt as error:  # what was saved and how to resume, or that nothing was (rlce_trl.errors)
        print(interrupt_message(error), file=sys.stderr)
        return 130


__all__ = ["COMMANDS", "build_parser", "main"]
