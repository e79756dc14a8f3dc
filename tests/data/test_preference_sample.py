from collections import Counter

import pytest

from rlce_trl.data import load_preference_sample, to_dataset
from rlce_trl.data.prompts import SOLVER_SYSTEM_PROMPT


def test_sample_sizes_and_shape():
    train, test = load_preference_sample("train"), load_preference_sample("test")
    assert (len(train), len(test)) == (32, 8)
    assert len(Counter(r["topic"] for r in train)) == 4
    assert len({r["id"] for r in train + test}) == 40
    for row in train + test:
        assert row["task"] == "prefeval" and row["form"] == "explicit" and row["answer_options"] == []
        assert row["prompt"][0] == {"role": "system", "content": SOLVER_SYSTEM_PROMPT}
        assert row["prompt"][-1]["role"] == "user" and row["prompt"][-1]["content"] == row["question"]
    assert all("gold" not in r for r in train)
    assert all(r["gold"] == r["prompt"][1]["content"] for r in test)


def test_sample_is_deterministic_and_loads_as_dataset():
    assert load_preference_sample("train") == load_preference_sample("train")
    dataset = to_dataset(load_preference_sample("test"))
    assert len(dataset) == 8 and "gold" in dataset.column_names
    assert "gold" not in to_dataset(load_preference_sample("train")).column_names


def test_unknown_split():
    with pytest.raises(ValueError, match="splits"):
        load_preference_sample("validation")
