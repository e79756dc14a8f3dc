# Copyright the rlce-trl developers. Licensed under the Apache License, Version 2.0.
"""Writes the worked example of the README's "Your own task": a tiny number-parity task (no third-party data).

    python examples/own_task/make_data.py        # writes train.jsonl, validation.jsonl, test.jsonl next to it

Each row is `{"number": 17, "parity": "odd"}`; `parity.yaml` says how a row becomes a prompt, the labels, the gold
column and the metric.
"""

import json
import random
from pathlib import Path


def write(folder: Path, seed: int = 0) -> None:
    rng = random.Random(seed)
    numbers = rng.sample(range(10, 1000), 64)
    for split, chunk in (("train", numbers[:40]), ("validation", numbers[40:52]), ("test", numbers[52:])):
        lines = [json.dumps({"number": n, "parity": "even" if n % 2 == 0 else "odd"}) for n in chunk]
        (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    write(Path(__file__).resolve().parent)
