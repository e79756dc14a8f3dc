"""Test-time training runs side by side (the shape of the paper's Table 2): the per-pass evaluation scores that
[`~rlce_trl.training.tta.PassEvaluationCallback`] writes to `<output_dir>/tta/passes.json`, one row per run.

    rlce-trl analyze ttt outputs/tta_prefeval_rlce_g4 outputs/tta_prefeval_ttrl_g4 outputs/tta_prefeval_ttrl_g16
"""

from __future__ import annotations

import json
from pathlib import Path


def load_run(path: str | Path) -> dict:
    """`passes.json` of a run: the run's output folder, its `tta/` folder or the file itself."""
    path = Path(path)
    for candidate in (path / "tta" / "passes.json", path / "passes.json", path):
        if candidate.is_file():
            try:
                record = json.loads(candidate.read_text(encoding="utf-8"))
            except json.JSONDecodeError as error:
                raise ValueError(f"{candidate} is not valid JSON ({error}); rerun that run's evaluation.") from None
            if not isinstance(record, dict) or not isinstance(record.get("passes"), list):
                raise ValueError(f"{candidate} has no 'passes' list: is it a test-time adaptation record?")
            record["run"] = path.name if path.is_dir() else path.parent.name
            return record
    raise FileNotFoundError(f"No tta/passes.json under {path}: run a tta_* recipe there first (tta_split set).")


def table(runs: list[dict]) -> str:
    """Markdown: one row per run, one column per pass (0 = base model), and the change of the last pass from the
    base (when the base was evaluated). Unjudged free-text scores show as `n/a`."""
    width = max((p["pass"] for r in runs for p in r["passes"]), default=0)
    head = ["run", "method", "task"] + [("base" if i == 0 else f"pass {i}") for i in range(width + 1)] + ["delta"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 3 + "---:|" * (width + 2)]
    for run in runs:
        scores = {p["pass"]: p.get("score") for p in run["passes"]}
        cells = [run["run"], run.get("method") or "?", run.get("task") or "?"]
        cells += ["n/a" if scores.get(i) is None else f"{100 * scores[i]:.2f}" for i in range(width + 1)]
        last = max((i for i in scores if i > 0), default=None)
        base = scores.get(0)
        delta = (f"{100 * (scores[last] - base):+.2f}" if last is not None and base is not None
                 and scores[last] is not None else "")
        lines.append("| " + " | ".join(cells + [delta]) + " |")
    return "\n".join(lines)
