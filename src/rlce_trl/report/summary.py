"""The summary strip at the top of the report: a few numbers read from the logged metrics and the evidence trail."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..evidence.aggregation import mean
from ..health.signal import percent
from .data import RunData
from .plots import metric_prefix, verdict_order


@dataclass
class Item:
    label: str
    value: str
    detail: str  # a tooltip: what the number is and where it comes from


def _training(history: list[dict]) -> list[dict]:
    """The per-step training entries (not the end-of-run summary or evaluation entries)."""
    return [e for e in history if isinstance(e.get("step"), (int, float)) and "train_runtime" not in e
            and not any(k.startswith("eval_") for k in e)]


def _values(entries: list[dict], key: str) -> list[float]:
    return [float(e[key]) for e in entries
            if isinstance(e.get(key), (int, float)) and not isinstance(e.get(key), bool)]


def summary_items(data: RunData) -> list[Item]:
    """Steps, groups, verified and tie rates, the verdict mix and the verifier's share of step time."""
    history = data.log_history
    entries = _training(history)
    p = metric_prefix(history)
    steps = [e["step"] for e in history if isinstance(e.get("step"), (int, float))]
    if steps:
        items = [Item("steps", str(int(max(steps))),
                      f"optimizer steps logged in trainer_state.json ({len(entries)} entries with metrics)")]
    elif data.groups:
        items = [Item("steps", str(max(g["step"] for g in data.groups)),
                      "the last step of the evidence trail (no metrics logged)")]
    else:
        items = [Item("steps", "n/a", "no metrics logged")]
    if data.groups:
        statuses = Counter(str(g.get("status")) for g in data.groups)
        items.append(Item("groups", str(len(data.groups)),
                          "rollout groups in the evidence trail: " + ", ".join(f"{k} {v}" for k, v in
                                                                               statuses.most_common())))
    else:
        items.append(Item("groups", "n/a", "no evidence trail in this run"))
    for label, name in (("verified", "verified_fraction"), ("tied", "tie_rate")):
        key = f"{p}/{name}"
        values = _values(entries, key)
        detail = f"mean of {key} over {len(values)} logged steps" if values else f"{key} not logged"
        items.append(Item(label, percent(mean(values)), detail))
    verdicts = sorted({k for e in entries for k in e if k.startswith(f"{p}/verdict_") and k.endswith("_frac")},
                      key=verdict_order)
    mix = [(verdict_order(k), mean(_values(entries, k))) for k in verdicts]
    mix = [(name, value) for (rank, name), value in mix  # yes / no / unknown always, another verdict when it occurred
           if value is not None and (rank < 3 or value > 0)]
    items.append(Item("verdicts", " · ".join(f"{name} {percent(value)}" for name, value in mix) or "n/a",
                      "mean share of each verdict over the logged steps (" + ", ".join(verdicts) + ")" if mix
                      else "no verdicts logged"))
    timed = [e for e in entries if _values([e], f"{p}/verifier_seconds") and _values([e], "step_time")]
    pairs = [(float(e[f"{p}/verifier_seconds"]), float(e["step_time"])) for e in timed]
    total = sum(t for _, t in pairs)
    share = sum(v for v, _ in pairs) / total if total > 0 else None
    items.append(Item("verifier time", percent(share),
                      f"sum of {p}/verifier_seconds over sum of step_time, {len(pairs)} steps" if share is not None
                      else "verifier_seconds or step_time not logged"))
    return items
