"""`rlce-trl report RUN_DIR`: one self-contained HTML page about a training run, plus PNG plots beside it.

The page shows curves over steps (rewards, verdict fractions, tie and verified rates, distinct answers, verifier
seconds against step time) from `trainer_state.json`, a browser of the rollout groups of the evidence trail
(`rlce_evidence.jsonl`, see `rlce_trl.audit`) with filters and each group's evidence, and the completions tables with
a link from each completion to its group. It opens without network access.

```python
from rlce_trl.report import build_report

page = build_report("runs/quickstart")  # runs/quickstart/report/index.html (+ curves.png, curve_*.png)
```
"""

from __future__ import annotations

import logging
import os
from collections import Counter

from ..data.jsonl import read_json
from .data import RunData, load_run
from .health import health_section
from .page import render
from .plots import CURVES_PNG, panels, svg_panel, write_pngs
from .summary import summary_items
from .texts import TextStore

logger = logging.getLogger(__name__)

REPORT_DIR = "report"
MAX_GROUPS = 5000


#: What a training run records about itself for its report (`{"title": the task's display name}`).
RUN_FILE = "rlce_run.json"


def run_title(run_dir: str) -> str:
    """The report's title: the task's display name the run recorded in `rlce_run.json`, else the folder's name."""
    title = (read_json(os.path.join(run_dir, RUN_FILE)) or {}).get("title")
    return str(title) if title else os.path.basename(os.path.normpath(os.path.abspath(run_dir)))


def _summary(data: RunData) -> str:
    steps = [e["step"] for e in data.log_history if isinstance(e.get("step"), (int, float))]
    parts = [f"{int(max(steps))} steps logged" if steps else "no metrics"]
    if data.groups:
        statuses = Counter(g.get("status") for g in data.groups)
        parts.append(f"{len(data.groups)} groups (" + ", ".join(f"{k} {v}" for k, v in statuses.most_common()) + ")")
        methods = sorted({str(g.get("method")) for g in data.groups})
        parts.append("method " + ", ".join(methods))
    if data.completions:
        parts.append(f"{len(data.completions)} completions")
    return " · ".join(parts)


def build_report(run_dir: str, output_dir: str | None = None,
                 max_groups: int | None = MAX_GROUPS) -> tuple[str, RunData]:
    """Write `index.html` and the PNG plots into `output_dir` (default `RUN_DIR/report`); returns (page path, data).
    Raises FileNotFoundError when the directory holds nothing to report."""
    data = load_run(run_dir, max_groups)
    output_dir = output_dir or os.path.join(run_dir, REPORT_DIR)
    os.makedirs(output_dir, exist_ok=True)
    svgs = [svg_panel(title, data.log_history, keys) for title, keys in panels(data.log_history)]
    write_pngs(data.log_history, output_dir)
    title = f"rlce-trl report: {run_title(run_dir)}"
    store = TextStore(output_dir)  # long texts: capped on the page, in full beside it
    groups = [store.cap_all(g) for g in data.groups]
    completions = [{k: store.cap(v) if k in ("prompt", "completion") and isinstance(v, str) else v
                    for k, v in row.items()} for row in data.completions]
    html = render(title, _summary(data), data.notes, svgs, groups, completions, data.completion_columns,
                  strip=summary_items(data), health=health_section(run_dir, data.log_history, data.health_alarms))
    path = os.path.join(output_dir, "index.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(html)
    return path, data


def card_section(output_dir: str) -> str:
    """Build the run report (`rlce-trl report`) into `<output_dir>/report` and return the card's markdown that embeds
    its curves and links the page; "" when there is nothing to report."""
    try:
        page, _ = build_report(output_dir)
    except Exception as error:  # noqa: BLE001 -- the card never fails on its report
        logger.warning("No training report in the model card: %s", error)
        return ""
    folder = os.path.relpath(os.path.dirname(page), output_dir).replace(os.sep, "/")
    image = ""
    if os.path.exists(os.path.join(os.path.dirname(page), CURVES_PNG)):
        image = f"![Training curves: rewards, verdicts, ties, verifier time]({folder}/{CURVES_PNG})\n\n"
    return (f"### Training report\n\n{image}Every reward decision of this run (the distinct answers of each rollout "
            f"group, the evidence tests, the verifier's verdicts and the winner) is in [{folder}/index.html]"
            f"({folder}/index.html), a page that opens offline in a browser.\n")


__all__ = ["build_report", "card_section"]
