"""Datasets in the GRPO-ready row format the RLCE rewards read.

Every row has `prompt` (chat messages: the solver system prompt, the conversation, the question as the last user
turn), `answer_options` (the closed label set, or an empty list for free text), `task`, `id` and task metadata.
Validation and test rows also carry `gold`; train rows never do, because TRL passes every dataset column to the
reward functions.
"""

from __future__ import annotations

from .jsonl import read_jsonl, write_jsonl
from .prefeval import FORMS as PREFEVAL_FORMS
from .prefeval import SPLITS as PREFEVAL_SPLITS
from .prefeval import build_prefeval, prepare_prefeval, resolve_prefeval_dir
from .sample import load_preference_sample


def to_dataset(rows: list[dict]):
    """A `datasets.Dataset` from rows. `datasets` is imported here, so that building data needs neither it nor
    torch."""
    from datasets import Dataset

    return Dataset.from_list(rows)


__all__ = [
    "PREFEVAL_FORMS", "PREFEVAL_SPLITS", "build_prefeval", "load_preference_sample", "prepare_prefeval", "read_jsonl",
    "resolve_prefeval_dir", "to_dataset", "write_jsonl",
]
