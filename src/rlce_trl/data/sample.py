"""A small preference dataset of our own, in PrefEval's explicit shape, shipped with the package.

40 preference-question pairs over four topics (travel, food, books and media, technology and shopping), written for
this package (Apache-2.0 like the code), 32 train / 8 test. Each conversation is the preference as a user turn, the
fixed acknowledgement, one or two unrelated turn pairs of padding, then the question. It is for the offline quickstart
and for test fixtures; it says nothing about performance on PrefEval.
"""

from __future__ import annotations

import random
from importlib import resources

from .jsonl import read_jsonl
from .prefeval import build_conversation, make_row

SAMPLE_FILE = "preference_sample.jsonl"
SAMPLE_SPLITS = ("train", "test")

#: Small talk of our own, used as padding between the preference and the question.
FILLER_PAIRS = [
    ("How many minutes should I boil an egg for a runny yolk?",
     "About six minutes from boiling water for a runny yolk and a set white; cool it in cold water right after."),
    ("What's the difference between weather and climate?",
     "Weather is the state of the atmosphere over hours or days; climate is the average of weather over decades."),
    ("Can you give me a synonym for 'happy'?",
     "Some options: cheerful, content, joyful, glad, or delighted, depending on the tone you want."),
    ("How do I convert Fahrenheit to Celsius?",
     "Subtract 32, then multiply by 5/9. For example, 68 F is (68 - 32) x 5/9 = 20 C."),
    ("Why is the sky blue?",
     ("Air molecules scatter short blue wavelengths of sunlight much more than red ones (Rayleigh scattering), "
      "so blue light reaches your eyes from all directions of the sky.")),
    ("What's a good way to remember people's names?",
     ("Repeat the name when you are introduced, link it to something about the person, and use it once more "
      "before you say goodbye.")),
]


def _sample_records() -> list[dict]:
    with resources.as_file(resources.files(__package__) / SAMPLE_FILE) as path:
        return read_jsonl(path)


def load_preference_sample(split: str = "train", seed: int = 0) -> list[dict]:
    """The bundled preference sample as GRPO-ready rows (same columns as the PrefEval builder, PrefEval's `task`,
    `form="explicit"`); `gold` is present on the test split only.

    Args:
        split: `"train"` (32 rows) or `"test"` (8 rows).
        seed: seeds the choice of padding turns for each row.
    """
    if split not in SAMPLE_SPLITS:
        raise ValueError(f"The preference sample has splits {SAMPLE_SPLITS}, not {split!r}.")
    rows = []
    for record in _sample_records():
        if record["split"] != split:
            continue
        rng = random.Random(f"sample:{seed}:{record['id']}")
        conversation = build_conversation("explicit", record, rng.sample(FILLER_PAIRS, rng.randint(1, 2)))
        topic, index = record["topic"], int(record["id"].rsplit("/", 1)[1])
        rows.append({**make_row("explicit", topic, index, record, conversation, split), "id": record["id"]})
    return rows
