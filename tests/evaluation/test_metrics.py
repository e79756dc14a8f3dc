import json
from pathlib import Path

import pytest

from rlce_trl.data.hba import MOSEI_LABELS, MOSEI_POLARITY, URFUNNY_LABELS
from rlce_trl.data.tasks import TASKS
from rlce_trl.evaluation.metrics import (
    accuracy,
    binary_weighted_f1,
    extract_prediction,
    macro_average,
    task_score,
    weighted_f1,
)


def mosei_binary_weighted_f1(predictions, golds):
    return binary_weighted_f1(predictions, golds, MOSEI_POLARITY)


def urfunny_weighted_f1(predictions, golds):
    return weighted_f1(predictions, golds, URFUNNY_LABELS)

VECTORS = json.loads((Path(__file__).parent / "metric_vectors.json").read_text())
OPTIONS = {"mosei": MOSEI_LABELS, "urfunny": URFUNNY_LABELS, "free": []}


@pytest.mark.parametrize("case", VECTORS["mosei_binary_weighted_f1"])
def test_mosei_vectors(case):
    assert mosei_binary_weighted_f1(case["predictions"], case["golds"]) == pytest.approx(case["expected"])
    records = [{"prediction": p, "gold": g} for p, g in zip(case["predictions"], case["golds"], strict=True)]
    assert task_score("mosei", records) == pytest.approx(case["expected"])  # the task's metric is this one


@pytest.mark.parametrize("case", VECTORS["urfunny_weighted_f1"])
def test_urfunny_vectors(case):
    assert urfunny_weighted_f1(case["predictions"], case["golds"]) == pytest.approx(case["expected"])
    records = [{"prediction": p, "gold": g} for p, g in zip(case["predictions"], case["golds"], strict=True)]
    assert task_score("urfunny", records) == pytest.approx(case["expected"])
    assert TASKS["urfunny"].labels == URFUNNY_LABELS


@pytest.mark.parametrize("case", VECTORS["extract_prediction"])
def test_extraction_vectors(case):
    assert extract_prediction(case["response"], OPTIONS[case["options"]]) == case["expected"]


def test_neutral_prediction_counts_against_gold_class_only():
    # one positive gold predicted neutral: recall of "positive" drops, precision of "negative" does not
    golds = ["positive", "positive", "negative"]
    assert mosei_binary_weighted_f1(["positive", "neutral", "negative"], golds) == pytest.approx(
        (2 * (2 / 3) + 1 * 1.0) / 3
    )


def test_weighted_f1_length_mismatch():
    with pytest.raises(ValueError):
        weighted_f1(["a"], ["a", "b"], ["a", "b"])


def test_accuracy_and_macro():
    assert accuracy([True, False, None, True]) == 0.5
    assert accuracy([]) == 0.0
    assert macro_average([0.5, 0.7, 0.9]) == pytest.approx(0.7)


def test_task_score_dispatch():
    assert task_score("urfunny", [{"prediction": "humour", "gold": "humour"}]) == 1.0
    assert task_score("prefeval", [{"correct": True}, {"correct": None}]) == 0.5
    with pytest.raises(ValueError, match="known tasks"):
        task_score("mmlu", [])


def test_metrics_module_does_not_import_torch():
    import subprocess
    import sys

    # relative to `import rlce_trl`, which may import torch for the trainer
    code = (
        "import sys, rlce_trl; before = 'torch' in sys.modules; "
        "import rlce_trl.evaluation.metrics, rlce_trl.data.prefeval; print(before or 'torch' not in sys.modules)"
    )
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        == "True"
    )
