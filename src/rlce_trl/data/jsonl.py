"""JSON lines and atomic writes: the one place the package reads and writes JSON-lines files, and writes a file
atomically (data builders, evaluation outputs, the evidence trail, the health alarms, the selection pool, the
co-evolution state and corpora, the comparison's cell records).

A whole file ([`write_jsonl`], [`write_json`]) is written into a temporary file beside the target, flushed to disk,
then renamed over it (`os.replace`), so a reader (or a run killed mid-write) sees the old file or the new one, never
half of one. A log a run appends to ([`append_jsonl`]) is first repaired by [`repair_jsonl_tail`], so the next append
starts on a fresh line instead of gluing a row onto half a row.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterable
from itertools import count, takewhile
from pathlib import Path

from ..errors import InputError, MissingInputError


def json_line(row: dict, allow_nan: bool = True) -> str:
    """One JSON-lines line: the row as compact UTF-8 JSON and a newline (`allow_nan=False`: NaN is an error)."""
    return json.dumps(row, ensure_ascii=False, allow_nan=allow_nan) + "\n"


def _write_atomic(path: str | os.PathLike, write: Callable) -> None:
    """`write(handle)` into a temporary file in `path`'s folder, `fsync`, then rename it over `path`; the temporary
    file is removed when anything fails (the target is then untouched)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")  # the umask's permissions
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_jsonl(rows: Iterable[dict], path: str | os.PathLike) -> int:
    """Write rows as a JSON-lines file (UTF-8, one object a line), atomically; returns the number written."""
    rows = list(rows)
    _write_atomic(path, lambda f: f.writelines(map(json_line, rows)))
    return len(rows)


def write_json(obj, path: str | os.PathLike) -> None:
    """Write one JSON value (indented, UTF-8), atomically: readers never see a half-written file."""
    _write_atomic(path, lambda f: f.write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n"))


def append_jsonl(rows: Iterable[dict], path: str | os.PathLike, fsync: bool = False,
                 allow_nan: bool = True) -> int:
    """Append rows to a JSON-lines file (created with its folder if missing, also for no rows), flushed before it
    returns (`fsync`: also to disk); returns the number written. Call [`repair_jsonl_tail`] once before the first
    append of a resumed run."""
    path, rows = Path(path), list(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.writelines(json_line(row, allow_nan) for row in rows)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    return len(rows)


def _part(path: Path, k: int) -> Path:
    """The `k`-th rotated part of `path`: `log.jsonl` -> `log.<k>.jsonl`."""
    return path.with_name(f"{path.stem}.{k}{path.suffix}")


def rotated_paths(path: str | os.PathLike) -> list[Path]:
    """The rotated parts of `path` on disk (`log.1.jsonl`, `log.2.jsonl`, ...: newest first), without `path`."""
    return list(takewhile(Path.exists, (_part(Path(path), k) for k in count(1))))


def rotate_jsonl(path: str | os.PathLike, keep: int) -> None:
    """Rotate a log that reached its size limit: `path` becomes part 1, part k becomes part k+1, parts beyond `keep`
    are removed, and the next append starts a fresh `path`. `keep=0` just removes `path` (and any old parts)."""
    path = Path(path)
    for old in rotated_paths(path)[max(keep - 1, 0):]:
        old.unlink()  # the oldest parts, beyond what is kept
    for k in range(len(rotated_paths(path)), 0, -1):
        os.replace(_part(path, k), _part(path, k + 1))
    if path.exists():
        if keep:
            os.replace(path, _part(path, 1))
        else:
            path.unlink()


def truncate_jsonl(path: str | os.PathLike, keep: Callable[[dict], bool]) -> int:
    """A resumed run's truncation: keep the rows for which `keep(row)` holds, drop the others and every unreadable
    line, and rewrite the file atomically (only when something is dropped). Returns how many lines were dropped; 0
    when there is no file."""
    path = Path(path)
    if not path.exists():
        return 0
    rows, skipped = read_jsonl_lenient(path)
    kept = [row for row in rows if keep(row)]
    dropped = len(rows) - len(kept) + skipped
    if dropped:
        write_jsonl(kept, path)
    return dropped


def read_jsonl_counted(path: str | os.PathLike, what: str = "JSONL file",
                       lenient: bool = False) -> tuple[list[dict], int]:
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
        if isinstance(row, dict):
            rows.append(row)
        elif lenient:
            skipped += 1
        else:
            raise InputError(f"{what} {str(path)!r} line {number} is a JSON {type(row).__name__}, not an object: "
                             "each line must be one JSON object ({...}).")
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
    data = path.read_bytes() if path.exists() else b""
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


def read_json(path: str | os.PathLike) -> dict | None:
    """The JSON object in the file `path`; `None` when it is missing, unreadable, not JSON (torn by a kill) or not an
    object: for records a reader can do without (it redoes the work, or falls back on a default)."""
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
