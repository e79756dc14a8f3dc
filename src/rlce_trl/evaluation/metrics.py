"""Task metrics of the paper's evaluation protocol (appendix A, table 5), as pure functions.

- MOSEI-Sentiment: binary weighted F1 after collapsing the seven phrases to polarity; rows with a neutral gold label
  are dropped, and a neutral or invalid prediction counts against the gold class (a miss for that class, a false
  positive for none).
- UR-FUNNY: weighted F1 over humour / not humour, all rows scored; an invalid prediction counts against the gold class.
- IntentQA and PrefEval: accuracy of judge verdicts (see `judges.py`); unjudged rows count as incorrect.

Scores are fractions in [0, 1]; reports multiply by 100. No torch and no scikit-learn here: the F1 below is the
support-weighted average of per-class F1 over the listed classes (scikit-learn's `average="weighted"` with `labels=`),
with 0 for a class that has no true positives.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..data.hba import MOSEI_POLARITY, URFUNNY_LABELS
from ..evidence.answers import extract_answer

#: The task answer of one response with the paper's fallbacks (appendix A): the same reader RLCE trains with.
extract_prediction = extract_answer

#: The metric each task reports (table 5).
TASK_METRIC_NAMES = {
    "mosei": "binary_weighted_f1",
    "urfunny": "weighted_f1",
    "intentqa": "judge_accuracy",
    "prefeval": "judge_accuracy",
}


def polarity(label: str | None) -> str | None:
    """`"negative"`, `"neutral"` or `"positive"` for a MOSEI phrase; `None` for anything else."""
    return MOSEI_POLARITY.get(label) if label is not None else None


def weighted_f1(predictions: Sequence[str | None], golds: Sequence[str], labels: Sequence[str]) -> float:
    """Per-class F1 over `labels`, averaged with weights equal to each class's gold support.

    A prediction outside `labels` (`None`, an invalid answer) is a miss for its gold class and a false positive for
    no class. Gold values outside `labels` are not expected; they are ignored in the average.
    """
    if len(predictions) != len(golds):
        raise ValueError(f"{len(predictions)} predictions for {len(golds)} gold labels.")
    total, score = 0, 0.0
    for label in labels:
        tp = sum(p == label and g == label for p, g in zip(predictions, golds, strict=True))
        fp = sum(p == label and g != label for p, g in zip(predictions, golds, strict=True))
        support = sum(g == label for g in golds)
        f1 = 2 * tp / (2 * tp + fp + (support - tp)) if tp else 0.0
        score += support * f1
        total += support
    return score / total if total else 0.0


def mosei_binary_weighted_f1(predictions: Sequence[str | None], golds: Sequence[str]) -> float:
    """MOSEI-Sentiment score: polarity-collapsed, neutral gold rows dropped, weighted F1 over negative / positive.

    `predictions` are extracted phrases (or `None`), `golds` the gold phrases. A predicted "neutral" or an invalid
    prediction on a scored row maps to neither polarity and so counts against the gold class.
    """
    if len(predictions) != len(golds):
        raise ValueError(f"{len(predictions)} predictions for {len(golds)} gold labels.")
    pairs = [(polarity(p), polarity(g)) for p, g in zip(predictions, golds, strict=True)]
    kept = [(p, g) for p, g in pairs if g in ("negative", "positive")]
    return weighted_f1([p for p, _ in kept], [g for _, g in kept], ("negative", "positive"))


def urfunny_weighted_f1(predictions: Sequence[str | None], golds: Sequence[str]) -> float:
    """UR-FUNNY score: weighted F1 over humour / not humour, every row scored."""
    return weighted_f1(predictions, golds, URFUNNY_LABELS)


def accuracy(correct: Sequence[bool | None]) -> float:
    """Share of rows judged correct; `None` (unjudged) counts as incorrect."""
    return sum(c is True for c in correct) / len(correct) if correct else 0.0


def macro_average(scores: Sequence[float]) -> float:
    """Unweighted mean, e.g. PrefEval over its explicit, choice and persona forms."""
    return sum(scores) / len(scores) if scores else 0.0


def task_score(task: str, records: Sequence[dict]) -> float:
    """The task's metric over per-row evaluation records.

    Closed-label tasks read `prediction` and `gold`; free-text tasks read `correct` (the judge verdict, `None` when
    unjudged).
    """
    if task == "mosei":
        return mosei_binary_weighted_f1([r.get("prediction") for r in records], [r["gold"] for r in records])
    if task == "urfunny":
        return urfunny_weighted_f1([r.get("prediction") for r in records], [r["gold"] for r in records])
    if task in ("intentqa", "prefeval"):
        return accuracy([r.get("correct") for r in records])
    raise ValueError(f"No metric for task {task!r}; known tasks: {sorted(TASK_METRIC_NAMES)}.")
