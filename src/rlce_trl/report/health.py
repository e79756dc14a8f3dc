"""The report's training-health panel: the `health/*` curves of the run and the alarms the monitor raised
(`rlce_trl.health`), read from `<run_dir>/rlce_health.jsonl`, or from the evidence trail's alarm lines when that file
is missing."""

from __future__ import annotations

import os
from html import escape

from ..health import HEALTH_FILE, no_signal_line, read_alarms, read_signal
from .plots import svg_panel

PANELS = [
    ("Health: collapse", ["health/one_answer_share", "health/answered_share", "health/zero_spread_share",
                          "health/signal_share", "health/answer_entropy_ratio", "health/near_duplicate_rate"]),
    ("Health: drift and entrenchment", ["health/verdict_drift", "health/reward_signal_divergence",
                                        "health/verified_majority_share", "health/task_reward"]),
]


def health_section(run_dir: str, log_history: list[dict], trail_alarms: list[dict] | None = None) -> str:
    """The panel's HTML; "" for a run without health metrics or alarms (monitor off, or an older run). The alarms
    come from `rlce_health.jsonl`, else the evidence trail's `health_alarm` lines; the "no learning signal" line (a
    run none of whose steps had one) from that file's signal lines, else the logged `health/step_signal`."""
    keys = {k for entry in log_history for k in entry if k.startswith("health/")}
    path = os.path.join(run_dir, HEALTH_FILE)
    alarms = read_alarms(path) if os.path.exists(path) else trail_alarms or []
    if not keys and not alarms:
        return ""
    silent = no_signal_line(read_signal(path))
    steps = [e["health/step_signal"] for e in log_history if "health/step_signal" in e]
    if silent is None and steps and not any(steps):
        silent = "no learning signal: no step had a group whose rewards differ"
    signal = (f'<p id="health-signal"><strong>No learning signal</strong>: no step of this run had a group whose '
              f"rewards differ, so the policy was not trained. {escape(silent)}.</p>" if silent else "")
    svgs = "".join(svg_panel(title, log_history, [k for k in names if k in keys])
                   for title, names in PANELS if any(k in keys for k in names))
    if alarms:
        rows = "".join(
            f"<tr><td>{escape(str(a.get('step')))}</td><td>{escape(str(a.get('rule', '')).replace('_', ' '))}</td>"
            f"<td>{escape(str(a.get('metric', '')))}</td><td>{_num(a.get('value'))}</td>"
            f"<td>{_num(a.get('threshold'))}</td><td>{'stopped the run' if a.get('stopped') else ''}</td></tr>"
            for a in alarms)
        table = ('<table id="health-alarms"><thead><tr><th>step</th><th>rule</th><th>metric</th><th>value</th>'
                 f"<th>threshold</th><th></th></tr></thead><tbody>{rows}</tbody></table>")
    else:
        table = '<p class="muted" id="health-alarms">No alarm was raised.</p>'
    return (f'<section id="health"><h2>Training health</h2><p class="muted">Collapse, verifier drift, '
            f"reward-vs-signal divergence and entrenchment, over the last steps against the first steps (rules in "
            f'docs/health.md).</p>{signal}<div class="curves">{svgs}</div><h3>Alarms</h3>{table}</section>')


def _num(value) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else escape(str(value))
