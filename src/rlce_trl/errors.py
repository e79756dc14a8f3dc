"""The package's own error types for bad input: each message is one line (or a short list) that names what is wrong
and the fix. `rlce-trl` prints them as `error: <message>` and exits with status 2, with no traceback; any other
exception is a bug and keeps its traceback."""

from __future__ import annotations


def first_line(error: BaseException, limit: int = 300) -> str:
    """An error's first non-empty line, at most `limit` characters (its type name when the message is empty): what a
    counted-and-skipped failure records."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:limit]


class InputError(ValueError):
    """A file, row, flag or setting the user gave cannot be used as it is; the message names the fix."""


class MissingInputError(InputError, FileNotFoundError):
    """A file or folder the user named does not exist (or is not what it should be); the message names the fix."""
