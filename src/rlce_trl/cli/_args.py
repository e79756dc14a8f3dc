"""What every `rlce-trl` parser shares: the parser class (one-line errors, the command's usage and a "did you mean"
for an unknown flag), the argparse types for counts (`positive_int`, `nonnegative_int`, `bounded_int`), and the
check of video rows that `evaluate` and `sample` share."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from ..data.hba import check_clips
from ..errors import InputError, MissingInputError, bounded_int, did_you_mean, nonnegative_int, positive_int

DTYPES = ("auto", "float32", "float16", "bfloat16")


def json_object(text: str) -> dict:
    """argparse type of `--vllm_kwargs`: a JSON object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(
            f"not JSON ({error.msg}); give an object such as '{{\"max_model_len\": 8192}}'"
        ) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("give a JSON object ({...})")
    return value


class CLIParser(argparse.ArgumentParser):
    """An `ArgumentParser` whose errors are one line (an [`InputError`], printed by `rlce-trl` as `error: ...`,
    exit 2). An unknown flag prints the command's own usage first and suggests the closest flag."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)  # an abbreviation would change meaning when a flag is added
        super().__init__(*args, **kwargs)

    def error(self, message):
        # "argument --n: 0: use 1 or more" (a count type's message) reads "--n 0: use 1 or more"
        match = re.fullmatch(r"argument (--\w+): (\S+): (use .*)", message)
        if match:
            message = f"{match[1]} {match[2]}: {match[3]}"
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice:
            options = re.findall(r"'([^']*)'", choice[2]) or [c.strip() for c in choice[2].split(",")]
            message += did_you_mean(choice[1], options)
        raise InputError(f"{self.prog}: {message}")

    def unknown(self, extra: list[str]) -> InputError:
        """The error for arguments this parser does not know: its usage on stderr, and a "did you mean"."""
        self.print_usage(sys.stderr)
        flags = [a for a in extra if a.startswith("-")]
        hint = ""
        if flags:
            options = [o for action in self._actions for o in action.option_strings if o.startswith("--")]
            hint = did_you_mean(flags[0].split("=", 1)[0], options) or f"; see `{self.prog} --help`"
        return InputError(f"{self.prog}: unrecognized arguments: {' '.join(extra)}{hint}")


def check_unknown_flags(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Before parsing: a `--flag` that the command's own parser does not know is an error with that command's usage
    and a "did you mean" (argparse would report a missing required flag first). Commands that pass unknown flags on
    to a recipe (`accepts_extra`) and everything after a bare `--` are left alone."""
    for word in argv:
        if word == "--":
            return
        if not word.startswith("-"):
            subs = _subparsers(parser)
            children = {**(subs.choices if subs else {}), **getattr(parser, "commands", {})}
            parser = children.get(word, parser)
            continue
        if parser._defaults.get("accepts_extra") or not word.startswith("--"):
            continue
        if word.split("=", 1)[0] not in parser._option_string_actions:
            raise parser.unknown([word])


def leaf_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser that parsed `args`: the one a command stored as `parser`, else the deepest subparser chosen."""
    if isinstance(getattr(args, "parser", None), argparse.ArgumentParser):
        return args.parser
    while (subs := _subparsers(parser)) and getattr(args, subs.dest, None) in subs.choices:
        parser = subs.choices[getattr(args, subs.dest)]
    return parser


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def check_video_rows(rows: list[dict], media_root: str | None) -> None:
    """Rows with videos need `--media_root`, and every clip they name must be there: checked before the model loads."""
    if not media_root:
        raise InputError("these rows hold videos: pass --media_root (the folder their paths are relative to).")
    if not Path(media_root).is_dir():
        raise MissingInputError(f"--media_root {media_root!r}: no such folder.")
    try:
        check_clips(rows, media_root)
    except ValueError as error:
        raise InputError(" ".join(str(error).split())) from None


__all__ = ["CLIParser", "bounded_int", "check_unknown_flags", "check_video_rows", "leaf_parser", "nonnegative_int",
           "positive_int"]
