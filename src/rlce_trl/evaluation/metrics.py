"""The metrics of the evaluation protocol (appendix A, table 5), as pure functions named by metric; which metric a
task reports is part of its definition ([`rlce_trl.data.tasks`]).

- `binary_weighted_f1` (MOSEI-Sentiment): weighted F1 after collapsing the labels to polarity (the task's
  `polarity`); rows with a neutral gold label are dropped, and a neutral or invalid prediction counts against the gold
  class (a miss for that class, a false positive for none).
- `weighted_f1` (UR-FUNNY, a user's labelled task): weighted F1 over the task's labels, all rows scored; an invalid
  prediction counts against the gold class.
- `judge_accuracy` (IntentQA, PrefEval): accuracy of judge verdicts (see `judges.py`); unjudged rows count as
  incorrect.
- `accuracy`, `exact_match`: share of rows whose answer equals the gold label / text.

Scores are fractions in [0, 1]; reports multiply by 100. No torch and no scikit-learn here: the F1 below is the
support-weighted average of per-class F1 over the listed classes (scikit-learn's `average="weighted"` with `labels=`),
with 0 for a class that has no true positives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..data.tasks import TASKS
from ..evidence.answers import extract_answer

#: The task answer of one response with the paper's fallbacks (appendix A): the same reader RLCE trains with.
extract_prediction = extract_answer


def weighted_f1(predictions: Sequence[str | None], golds: Sequence[str], labels: Sequence[str]) -> float:
    """Per-class F1 over `labels`, weighted by each class's gold support. A prediction outside `labels` (`None`, an
    invalid answer) is a miss for its gold class and a false positive for none; gold values outside `labels` are
    ignored."""
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


def binary_weighted_f1(predictions: Sequence[str | None], golds: Sequence[str], polarity: Mapping[str, str]) -> float:
    """Polarity-collapsed weighted F1 over negative / positive (MOSEI-Sentiment's score, see above); `polarity` maps
    each label to "negative", "neutral" or "positive"."""
    if len(predictions) != len(golds):
        raise ValueError(f"{len(predictions)} predictions for {len(golds)} gold labels.")
    pairs = [(polarity.get(p) if p is not None else None, polarity.get(g)) for p, g in zip(predictions, golds,
                                                                                           strict=True)]
    kept = [(p, g) for p, g in pairs if g in ("negative", "positive")]
    return weighted_f1([p for p, _ in kept], [g for _, g in kept], ("negative", "positive"))


def accuracy(correct: Sequence[bool | None]) -> float:
    """Share of rows judged correct; `None` (unjudged) counts as incorrect."""
    return sum(c is True for c in correct) / len(correct) if correct else 0.0


def macro_average(scores: Sequence[float]) -> float:
    """Unweighted mean, e.g. PrefEval over its explicit, choice and persona forms."""
    return sum(scores) / len(scores) if scores else 0.0


def _normal(text) -> str:
    return " ".join(str(text).split()).casefold() if text is not None else ""


def exact_match(records: Sequence[dict]) -> float:
    """Share of rows whose extracted answer equals the gold text, case and runs of spaces ignored."""
    hits = [r.get("prediction") is not None and _normal(r["prediction"]) == _normal(r["gold"]) for r in records]
    return sum(hits) / len(hits) if hits else 0.0


def _predictions(records: Sequence[dict]) -> list[str | None]:
    return [r.get("prediction") for r in records]


def _golds(records: Sequence[dict]) -> list[str]:
    return [r["gold"] for r in records]


#: Metric name (a task's `metric`) -> score of per-row records, given the task's definition.
METRIC_FUNCTIONS = {
    "binary_weighted_f1": lambda records, task: binary_weighted_f1(_predictions(records), _golds(records),
                                                                   task.polarity or {}),
    "weighted_f1": lambda records, task: weighted_f1(_predictions(records), _golds(records), task.labels),
    "accuracy": lambda records, task: accuracy([r.get("prediction") == r["gold"] for r in records]),
    "exact_match": lambda records, task: exact_match(records),
    "judge_accuracy": lambda records, task: accuracy([r.get("correct") for r in records]),
}


def task_score(task: str, records: Sequence[dict]) -> float:
    """The task's metric ([`rlce_trl.data.tasks`]) over per-row evaluation records.

    Closed-label metrics read `prediction` and `gold`; `judge_accuracy` reads `correct` (the judge verdict, `None`
    when unjudged)."""
    if task not in TASKS:
        raise ValueError(f"No metric for task {task!r}; known tasks: {sorted(TASKS)}.")
    return METRIC_FUNCTIONS[TASKS[task].metric](records, TASKS[task])
