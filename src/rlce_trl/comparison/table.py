"""Table 1's shape from finished cells: per method the test score of every seed, mean and spread, Δ from the base
model, device-hours, and the paper's numbers beside ours where the model is the paper's. Written as Markdown, JSON and
a PNG (matplotlib). Pure arithmetic on the cells' records (no model), so it is tested on its own."""

from __future__ import annotations

import os
import statistics
from pathlib import Path

from ..data.jsonl import write_json
from ..data.tasks import get_task
from . import paper


def mean_std(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (n - 1, as a spread over seeds); std is None below two values."""
    if not values:
        return None, None
    return sum(values) / len(values), statistics.stdev(values) if len(values) > 1 else None


def _r(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def build_table(task: str, model: str, methods: list[str], seeds: list[int], cells: dict, base: dict | None) -> dict:
    """The table as a JSON-ready dict.

    Args:
        cells: `{(method, seed): record}`, a record with `score` (0-1, the task's metric on the test split),
            `device_hours`, `train_wall_s`, `eval_wall_s`, `best_step`; cells not finished are missing.
        base: the base model's record (`score`, `eval_wall_s`), or None when it was not evaluated.
    Scores are reported in percent, like the paper's.
    """
    paper_model = model == paper.PAPER_MODEL
    base_score = None if base is None or base.get("score") is None else 100 * base["score"]
    rows = []
    for method in methods:
        done = {s: cells[(method, s)] for s in seeds if (method, s) in cells}
        scores = [100 * done[s]["score"] for s in seeds if s in done and done[s].get("score") is not None]
        mean, std = mean_std(scores)
        hours = [done[s]["device_hours"] for s in seeds if s in done]
        reference = paper.paper_score(method, task) if paper_model else None
        rows.append({
            "method": method,
            "name": paper.METHODS.get(method, (method, ""))[0],
            "seeds": {str(s): _r(100 * done[s]["score"]) if done[s].get("score") is not None else None
                      for s in seeds if s in done},
            "missing_seeds": [s for s in seeds if s not in done],
            "mean": _r(mean),
            "std": _r(std),
            "delta": _r(mean - base_score) if mean is not None and base_score is not None else None,
            "device_hours_per_run": _r(sum(hours) / len(hours), 4) if hours else None,
            "device_hours_total": _r(sum(hours), 4) if hours else None,
            "paper_mean": reference[0] if reference else None,
            "paper_std": reference[1] if reference else None,
            "paper_delta": _r(reference[0] - paper.BASE[task]) if reference else None,
        })
    rlce = next((r["device_hours_per_run"] for r in rows if r["method"] == "rlce" and r["device_hours_per_run"]), None)
    for row in rows:
        hours = row["device_hours_per_run"]
        row["device_hours_x_rlce"] = _r(hours / rlce) if rlce and hours is not None else None
    if task in paper.TASKS:
        title, metric = paper.TASKS[task]
    else:  # a user's task: its display name and metric, no paper numbers
        spec = get_task(task)
        title, metric = spec.display_name, spec.metric.replace("_", " ")
    return {
        "task": task,
        "column": title,
        "metric": metric,
        "model": model,
        "paper_model": paper_model,
        "seeds": seeds,
        "base": {"score": _r(base_score), "paper": paper.BASE.get(task) if paper_model else None,
                 "eval_wall_s": None if base is None else base.get("eval_wall_s")},
        "rows": rows,
        "complete": all(not r["missing_seeds"] for r in rows) and base_score is not None,
    }


def _fmt(value: float | None, sign: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value:+.2f}" if sign else f"{value:.2f}"


def to_markdown(table: dict) -> str:
    """Table 1's shape for one task: method, our mean ± spread over seeds, Δ, per-seed scores, device-hours (and the
    ratio to RLCE's), the paper's mean ± std and Δ where the model is the paper's."""
    paper_cols = table["paper_model"]
    head = ["Method", f"{table['column']} (ours)", "Δ", "seeds", "device-h / run", "x RLCE"]
    head += [f"{table['column']} (paper)", "Δ (paper)"] if paper_cols else []
    lines = [f"## {table['column']}: {table['metric']} on the test split, best-on-validation checkpoint",
             "", f"Model: `{table['model']}`; seeds: {', '.join(map(str, table['seeds']))}. Mean ± sample std over "
             "seeds; Δ from the base model; device-hours = training wall time x devices + evaluation.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    base = table["base"]
    cells = [f"{table['model']} (base model)", _fmt(base["score"]), "–", "", "–", "–"]
    cells += [_fmt(base["paper"]), "–"] if paper_cols else []
    lines.append("| " + " | ".join(cells) + " |")
    for row in table["rows"]:
        ours = _fmt(row["mean"]) + (f" ± {row['std']:.2f}" if row["std"] is not None else "")
        seeds = ", ".join(f"{s}: {_fmt(v)}" for s, v in row["seeds"].items())
        if row["missing_seeds"]:
            seeds += ("; " if seeds else "") + "not finished: " + ", ".join(map(str, row["missing_seeds"]))
        cells = [row["name"], ours, _fmt(row["delta"], sign=True), seeds, _fmt(row["device_hours_per_run"]),
                 _fmt(row["device_hours_x_rlce"])]
        if paper_cols:
            theirs = _fmt(row["paper_mean"]) + (f" ± {row['paper_std']:.2f}" if row["paper_std"] is not None else "")
            cells += [theirs, _fmt(row["paper_delta"], sign=True)]
        lines.append("| " + " | ".join(cells) + " |")
    if paper_cols:
        lines += ["", "Paper: Table 1 (means over three seeds) with Table 6's standard deviations; ablations: Tables "
                  "3-4 (one run). The paper reports 26-44 GPU-hours for VisPlay and 28-40 for Video-Zero, three to "
                  "six times RLCE's, and about 30 for RLAC (three H200s)."]
    else:
        lines += ["", f"The paper's numbers are for {paper.PAPER_MODEL}; this model differs, so they are not shown."]
    if not table["complete"]:
        lines += ["", "Incomplete: rerun the same command to finish the missing cells."]
    return "\n".join(lines) + "\n"


def to_png(table: dict, path: str | os.PathLike) -> Path:
    """Bars of our mean per method with the spread over seeds as error bars, the paper's beside them when shown,
    and the base model as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = table["rows"]
    names = [r["method"] for r in rows]
    xs = list(range(len(rows)))
    width = 0.38 if table["paper_model"] else 0.6
    fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(rows) + 2), 3.6))
    ours = [r["mean"] if r["mean"] is not None else 0.0 for r in rows]
    errs = [r["std"] or 0.0 for r in rows]
    offset = -width / 2 if table["paper_model"] else 0.0
    ax.bar([x + offset for x in xs], ours, width, yerr=errs, capsize=3, label="ours", color="#3b75af")
    if table["paper_model"]:
        theirs = [r["paper_mean"] or 0.0 for r in rows]
        perr = [r["paper_std"] or 0.0 for r in rows]
        ax.bar([x + width / 2 for x in xs], theirs, width, yerr=perr, capsize=3, label="paper", color="#b0b0b0")
    if table["base"]["score"] is not None:
        ax.axhline(table["base"]["score"], color="#c0392b", linestyle="--", linewidth=1, label="base model")
    ax.set_xticks(xs, names, rotation=20, ha="right")
    ax.set_ylabel(f"{table['column']} ({table['metric'].split(',')[0]}, %)")
    ax.set_title(f"{table['column']}: test score of the best-on-validation checkpoint")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_table(table: dict, output_dir: str | os.PathLike) -> dict[str, Path]:
    """`comparison.md`, `comparison.json` and `comparison.png` in `output_dir`."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": output_dir / "comparison.md", "json": output_dir / "comparison.json",
             "png": output_dir / "comparison.png"}
    paths["markdown"].write_text(to_markdown(table), encoding="utf-8")
    write_json(table, paths["json"])
    to_png(table, paths["png"])
    return paths
