"""Labelled calibration cases: the claim set built from the bundled preference sample, and case files.

A case is what the validator is asked in training -- a sample context and one evidence test -- with the verdict a
person would give. The built-in claim set needs no annotation: every row of the bundled preference sample (40 rows,
`data/preference_sample.jsonl`) gives
- a **true** claim: the row's own stated preference, as a claim about its own conversation (label `yes`);
- a **false** claim: the preference of a row from another topic, which its conversation never states (label `no`);
- for every second row (alternating by topic, so each half gets as many), an **unknowable** claim: something no
  conversation can show (label `unknown`).
That is 100 claims, true yes-rate 0.40. Rows are split per topic, alternately, into a `calibration` half and a
`held-out` half, so no conversation appears in both.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from ..data.jsonl import read_jsonl
from ..evidence.prompts import VERDICTS, render_context

SPLITS = ("calibration", "held-out")

#: Claims that no conversation of the sample can decide (the user's future, their unstated circumstances).
UNKNOWABLE = (
    "The user will be satisfied with whatever they end up choosing.",
    "The user is asking this question on a weekday.",
    "The user has asked another assistant the same question before.",
    "The user will follow the first suggestion they receive.",
    "The user is older than forty.",
)


@dataclass(frozen=True)
class CalibrationCase:
    """One labelled validation case: is `test` supported by `context`? `label` is yes / no / unknown."""

    id: str
    context: str
    test: str
    label: str
    split: str = "calibration"
    source: str = ""  # "true" / "false" / "unknowable" for the built-in claim set, free text otherwise


def claim_text(preference: str) -> str:
    """A stated preference as an evidence test about the conversation."""
    return f"Earlier in the conversation the user said: {preference.strip()}"


def preference_claims(seed: int = 0) -> list[CalibrationCase]:
    """The built-in claim set (module docstring): 40 true, 40 false and 20 unknowable claims over 40 conversations."""
    from ..data.sample import _sample_records, load_preference_sample

    records = {r["id"]: r for r in _sample_records()}
    rows = load_preference_sample("train", seed) + load_preference_sample("test", seed)
    rows.sort(key=lambda row: row["id"])
    rng = random.Random(f"claims:{seed}")
    seen_in_topic: dict[str, int] = {}
    topics = sorted({row["topic"] for row in rows})
    cases = []
    for n, row in enumerate(rows):
        topic = row["topic"]
        index = seen_in_topic.get(topic, 0)
        split = SPLITS[index % 2]
        seen_in_topic[topic] = index + 1
        context = render_context(row["prompt"])
        own = records[row["id"]]["preference"]
        other = rng.choice([r for r in rows if r["topic"] != topic])
        false = claim_text(records[other["id"]]["preference"])
        cases.append(CalibrationCase(f"{row['id']}/true", context, claim_text(own), "yes", split, source="true"))
        cases.append(CalibrationCase(f"{row['id']}/false", context, false, "no", split, source="false"))
        if (index + topics.index(topic)) % 2 == 0:  # every second row, as many in each half
            test = UNKNOWABLE[(n // 2) % len(UNKNOWABLE)]
            cases.append(CalibrationCase(f"{row['id']}/unknowable", context, test, "unknown", split,
                                         source="unknowable"))
    return cases


def load_cases(path: str | Path) -> list[CalibrationCase]:
    """Read labelled test cases (JSONL: `context`, `test`, `label`; optional `id`, `split`, `source`). A malformed row
    is one error naming its line and the fix."""
    cases = []
    try:
        rows = read_jsonl(path)
    except OSError as error:
        raise ValueError(f"Cannot read the case file {path}: {error.strerror}.") from None
    except ValueError as error:
        raise ValueError(f"The case file {path} is not JSON lines: {error}") from None
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise ValueError(f"{path}, row {n}: expected an object with context, test and label.")
        missing = [k for k in ("context", "test", "label") if not isinstance(row.get(k), str) or not row[k].strip()]
        if missing:
            raise ValueError(f"{path}, row {n}: needs non-empty string fields {', '.join(missing)}.")
        label = row["label"].strip().casefold()
        if label not in VERDICTS:
            raise ValueError(f"{path}, row {n}: label {row['label']!r} must be one of {', '.join(VERDICTS)}.")
        split = row.get("split", "calibration")
        if split not in SPLITS:
            raise ValueError(f"{path}, row {n}: split {split!r} must be one of {', '.join(SPLITS)}.")
        case_id, source = str(row.get("id", n)), str(row.get("source", ""))
        cases.append(CalibrationCase(case_id, row["context"], row["test"], label, split, source))
    return cases


def split_cases(cases: list[CalibrationCase], split: str) -> list[CalibrationCase]:
    """The cases of one split (`calibration`, `held-out`), or all of them for `all`."""
    if split == "all":
        return list(cases)
    if split not in SPLITS:
        raise ValueError(f"Unknown split {split!r}: use calibration, held-out or all.")
    return [c for c in cases if c.split == split]
