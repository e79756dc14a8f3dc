"""The rows a co-evolution run reads: the corpus and the validation split."""

from __future__ import annotations

from ..data.jsonl import read_jsonl
from ..errors import InputError


def load_corpus(path: str, hba_task: str | None = None) -> list[dict]:
    """The corpus rows: an HBA split (`hba_task` set) or GRPO-ready JSONL rows with a `prompt` (PrefEval:
    `rlce-trl prepare-prefeval`). Gold is never read here."""
    if hba_task:
        from ..data.hba import load_hba_split

        return load_hba_split(path, hba_task, "train")
    rows = read_jsonl(path)
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), list) or not row["prompt"]:
            raise InputError(f"{path}, row {i + 1}: no `prompt` (a list of chat messages): pass GRPO-ready rows "
                             "(e.g. written by `rlce-trl prepare-prefeval`) or set hba_task for an HBA split.")
    if not rows:
        raise InputError(f"{path} has no rows: pass the training split.")
    return rows


def picked_corpus(path: str, settings: dict, seed: int) -> list[dict]:
    """The corpus rows a run trains on: `corpus_size` of them drawn once (seeded, the same every round), or all."""
    from ..methods.rlac import pick_clips

    rows = load_corpus(path, settings.get("hba_task"))
    return pick_clips(rows, settings["corpus_size"], seed) if settings.get("corpus_size") else rows


def load_validation(path: str, hba_task: str | None = None) -> list[dict]:
    """The validation rows (with `gold`): an HBA validation split, or GRPO-ready JSONL rows."""
    if hba_task:
        from ..data.hba import load_hba_split

        return load_hba_split(path, hba_task, "validation")
    rows = read_jsonl(path)
    bad = [i + 1 for i, r in enumerate(rows) if not isinstance(r, dict) or "gold" not in r or "prompt" not in r]
    if not rows or bad:
        raise InputError(f"{path}: {'no rows' if not rows else f'row {bad[0]} has no prompt or gold'}; validation "
                         "needs rows with `prompt` and `gold` (e.g. the validation split of prepare-prefeval).")
    return rows
