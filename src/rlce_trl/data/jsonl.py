"""JSON-lines reading and writing shared by the data builders and the evaluation outputs."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path


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


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Read JSON lines, skipping blank lines."""
    with Path(path).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_jsonl_lenient(path: str | os.PathLike) -> tuple[list[dict], int]:
    """Read JSON lines that a killed writer may have left incomplete: (the objects, how many lines were skipped
    because they are not a JSON object, e.g. a truncated last line)."""
    rows, skipped = [], 0
    with Path(path).open(encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                skipped += 1
                continue
            if isinstance(row, dict):
                rows.append(row)
            else:
                skipped += 1
    return rows, skipped
