"""JSON-lines reading and writing: the one JSONL reader and writer of the package (data builders, evaluation outputs,
the analysis bench's logs).

- [`read_jsonl`] reads one JSON object per line. A **last** line that does not parse (a write cut short by a kill)
  is skipped and counted ([`read_jsonl_counted`]); any other bad line, a row that is not a JSON object, a file that
  is not UTF-8 or does not exist raises [`~rlce_trl.errors.InputError`] naming the file, the line and the fix.
- [`repair_jsonl_tail`] cuts such a fragment off a file that is about to be appended to, so the next append starts
  on a fresh line instead of gluing a row onto half a row.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from ..errors import InputError, MissingInputError


def write_jsonl(rows: Iterable[dict], path: str | os.PathLike) -> int:
    """Write rows as JSON lines (UTF-8, one object a line); returns the number written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def read_jsonl_counted(
    path: str | os.PathLike, what: str = "JSONL file", lenient: bool = False
) -> tuple[list[dict], int]:
    """`(rows, skipped)`: the objects of a JSON-lines file (blank lines ignored) and the number of unreadable last
    lines skipped (0 or 1). Raises [`InputError`] for anything else that is wrong. With `lenient` (logs a killed or
    concurrent writer may have damaged: the evidence trail), every line that is not a JSON object is skipped and
    counted instead."""
    path = Path(path)
    if not path.exists():
        raise MissingInputError(f"{what} {str(path)!r} does not exist: check the path.")
    if path.is_dir():
        raise MissingInputError(f"{what} {str(path)!r} is a folder, not a file: pass the .jsonl file inside it.")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{what} {str(path)!r} is not UTF-8 text (byte {error.start}): re-save it as UTF-8 "
                         "JSON lines.") from None
    except OSError as error:
        raise InputError(f"cannot read {what} {str(path)!r}: {error.strerror or error}.") from None
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    rows, skipped = [], 0
    for k, (number, line) in enumerate(lines):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            if lenient or (k == len(lines) - 1 and not text.endswith("\n")):
                skipped += 1  # a last line cut short by an interrupted write
                continue
            raise InputError(f"{what} {str(path)!r} line {number} is not valid JSON ({error.msg}): fix or delete "
                             "that line (one JSON object per line).") from None
        if not isinstance(row, dict):
            if lenient:
                skipped += 1
                continue
            raise InputError(f"{what} {str(path)!r} line {number} is a JSON {type(row).__name__}, not an object: "
                             "each line must be one JSON object ({...}).")
        rows.append(row)
    return rows, skipped


def read_jsonl(path: str | os.PathLike, what: str = "JSONL file") -> list[dict]:
    """The objects of a JSON-lines file; an unreadable last line (an interrupted write) is skipped."""
    return read_jsonl_counted(path, what)[0]


def read_jsonl_lenient(path: str | os.PathLike, what: str = "JSONL file") -> tuple[list[dict], int]:
    """`(rows, skipped)`: every JSON object of the file; any other line (a truncated write) is skipped and counted."""
    return read_jsonl_counted(path, what, lenient=True)


def repair_jsonl_tail(path: str | os.PathLike) -> int:
    """Make an append-only JSONL file safe to append to: cut an unreadable last line (a write cut short) and add a
    missing final newline. Returns the number of lines cut (0 or 1). Bad lines elsewhere are left for the reader to
    report."""
    path = Path(path)
    if not path.exists():
        return 0
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return 0
    start = data.rfind(b"\n") + 1
    try:
        json.loads(data[start:].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        with path.open("r+b") as f:
            f.truncate(start)
        return 1
    with path.open("ab") as f:
        f.write(b"\n")
    return 0
