"""A user's data file checked before `datasets` reads it, so that each problem is one line naming where it is and the
fix: an empty file, text that is not UTF-8 (the byte offset), JSON that does not parse (the line number), a CSV whose
delimiter yields a single column (the delimiter it seems to use). `datasets` alone says "An error occurred while
generating the dataset" for all of these. Parquet files are binary and left to `datasets`."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from ..errors import InputError

#: Delimiters a CSV saved by a spreadsheet in another locale may use instead of a comma.
OTHER_DELIMITERS = {";": "semicolons", "\t": "tabs", "|": "pipes"}


def check_data_file(path: str | Path, kind: str, what: str) -> None:
    """Raise [`InputError`] for a `json` / `csv` file (`kind`) that cannot give rows; `what` names the flag or key the
    user passed it with. The file exists (the caller checked)."""
    path = Path(path)
    data = path.read_bytes()
    name = f"{what} {path.name}"
    if not data.strip():
        raise InputError(f"{name} is empty: pass a file with one row per line (JSON lines) or a header and rows "
                         "(CSV).")
    if kind == "parquet":
        return
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(f"{name} is not UTF-8 text (byte {error.start}, {data[error.start:error.start + 1]!r}): "
                         "re-save it as UTF-8 (e.g. from Latin-1: `iconv -f latin1 -t utf-8`).") from None
    if kind == "json":
        _check_json(text, name)
    elif kind == "csv":
        _check_csv(text, name)


def _check_json(text: str, name: str) -> None:
    """A JSON document (an array of objects, or an object of columns), or JSON lines: the first line that does not
    parse, by number."""
    try:  # an array, or one object spread over several lines
        json.loads(text)
        return
    except json.JSONDecodeError as error:
        if text.lstrip().startswith("["):
            raise InputError(f"{name} line {error.lineno} is not valid JSON ({error.msg}, column {error.colno}): fix "
                             "that line.") from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{name} line {number} is not valid JSON ({error.msg}, column {error.colno}): fix or "
                             "delete that line (one JSON object per line).") from None
        if not isinstance(value, dict):
            raise InputError(f"{name} line {number} is a JSON {type(value).__name__}, not an object: each line must "
                             "be one JSON object ({...}).")


def _check_csv(text: str, name: str) -> None:
    """A header that parses as one column but holds another delimiter (a spreadsheet's `;`, a tab) names it; a
    one-column file of prompts alone is fine."""
    reader = csv.reader(io.StringIO(text))
    header = next((row for row in reader if any(cell.strip() for cell in row)), [])
    if len(header) != 1:
        return
    found = max(OTHER_DELIMITERS, key=header[0].count)
    if header[0].count(found):
        raise InputError(f"{name} reads as one column: its header {header[0][:80]!r} is separated by "
                         f"{OTHER_DELIMITERS[found]}, not commas: re-save it comma-separated (or as JSON lines).")
