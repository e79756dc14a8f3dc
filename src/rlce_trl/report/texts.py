"""Long texts on the page: each one capped at `PAGE_CHARS` characters (with an ellipsis), its full text written once
into `full/<hash>.txt` beside the page and linked, so a 30 MB answer makes a 30 MB text file, not a 30 MB page.

A capped text becomes `{"text": "<first PAGE_CHARS characters>…", "full": "full/<hash>.txt", "chars": N}` in the
page's data; the page shows the head and a link to the file.
"""

from __future__ import annotations

import glob
import hashlib
import os

PAGE_CHARS = 2000
FULL_DIR = "full"


class TextStore:
    """Caps texts for the page and writes their full text beside it (`out_dir/full/`)."""

    def __init__(self, out_dir: str, limit: int = PAGE_CHARS):
        self.out_dir, self.limit = out_dir, limit
        self.written: set[str] = set()
        for stale in glob.glob(os.path.join(out_dir, FULL_DIR, "*.txt")):  # from an earlier build of this page
            os.remove(stale)

    def cap(self, text: str) -> str | dict:
        """`text` itself when short, else the capped form with the path of the full text (written once)."""
        if len(text) <= self.limit:
            return text
        data = text.encode("utf-8", "surrogatepass")
        name = f"{FULL_DIR}/{hashlib.sha256(data).hexdigest()[:20]}.txt"
        if name not in self.written:
            os.makedirs(os.path.join(self.out_dir, FULL_DIR), exist_ok=True)
            with open(os.path.join(self.out_dir, name), "wb") as f:
                f.write(data)
            self.written.add(name)
        return {"text": text[: self.limit] + "…", "full": name, "chars": len(text)}

    def cap_all(self, value):
        """Every string inside `value` (dicts and lists walked) capped; keys and other values unchanged."""
        if isinstance(value, str):
            return self.cap(value)
        if isinstance(value, dict):
            return {k: self.cap_all(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.cap_all(v) for v in value]
        return value
