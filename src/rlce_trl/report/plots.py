"""The curves of the report, over training steps, from `trainer_state.json`'s `log_history`: drawn as inline SVG for
the page and as PNG files (matplotlib) for people who do not open HTML."""

from __future__ import annotations

import logging
import math
import os
import re
from html import escape

logger = logging.getLogger(__name__)

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
CURVES_PNG = "curves.png"


def metric_prefix(history: list[dict]) -> str:
    """The prefix of the reward method's metrics: `rlce`, or a baseline's name."""
    for entry in history:
        for key in entry:
            if key.endswith("/verifier_seconds") and not key.startswith("eval_"):
                return key.rsplit("/", 1)[0]
    return "rlce"


def verdict_order(key: str) -> tuple[int, str]:
    """yes, no, unknown, then any other verdict (e.g. invalid) by name."""
    name = key.rsplit("/", 1)[-1][len("verdict_"):-len("_frac")]
    return {"yes": 0, "no": 1, "unknown": 2}.get(name, 3), name


def panels(history: list[dict]) -> list[tuple[str, list[str]]]:
    """(title, metric names) of every panel that has data."""
    keys: list[str] = []
    for entry in history:
        keys += [k for k in entry if k not in keys and not k.startswith("eval_")]
    p = metric_prefix(history)
    wanted = [
        ("Rewards", [k for k in keys if k == "reward" or re.fullmatch(r"rewards/[^/]+/mean", k)]),
        ("Verdict fractions", sorted([k for k in keys if re.fullmatch(rf"{re.escape(p)}/verdict_\w+_frac", k)],
                                     key=verdict_order)),
        ("Tie and verified rates", [f"{p}/{n}" for n in ("tie_rate", "unresolved_tie_rate", "verified_fraction")]),
        ("Distinct answers per group", [f"{p}/distinct_answers_mean"]),
        ("Verifier seconds vs step time", [f"{p}/verifier_seconds", "step_time"]),
    ]
    return [(title, [k for k in names if k in keys]) for title, names in wanted if any(k in keys for k in names)]


#: What each panel's y axis measures.
Y_LABELS = {"Rewards": "mean reward", "Verdict fractions": "share of verdicts", "Tie and verified rates":
            "share of groups", "Distinct answers per group": "answers per group",
            "Verifier seconds vs step time": "seconds per step"}
#: Plain names of TRL's top-level metrics and of the reward method's (after its `<prefix>/`); the raw key stays in
#: a tooltip.
METRIC_NAMES = {"reward": "total reward", "step_time": "whole step", "tie_rate": "tied before tie-break",
                "unresolved_tie_rate": "still tied after tie-break", "verified_fraction": "verified answer found",
                "distinct_answers_mean": "distinct answers (mean)", "verifier_seconds": "verifier time"}


def metric_name(key: str) -> str:
    """A metric key as a reader's words: `rewards/rlce_verified/mean` -> "verified-answer reward",
    `rlce/verdict_yes_frac` -> "yes verdicts", `step_time` -> "whole step"; another key by its last part in words
    (`health/one_answer_share` -> "one answer share")."""
    if found := re.fullmatch(r"rewards/([^/]+)/mean", key):
        name = re.sub(r"^rlce_", "", found.group(1))
        return {"verified": "verified-answer reward", "format": "format reward"}.get(
            name, name.replace("_", " ") + " reward")
    name = key.rsplit("/", 1)[-1]
    if found := re.fullmatch(r"verdict_(\w+)_frac", name):
        return f"{found.group(1)} verdicts"
    return METRIC_NAMES.get(name, name.replace("_", " "))


def series(history: list[dict], key: str) -> list[tuple[float, float]]:
    """(step, value) points of one metric (training entries only)."""
    out = []
    for entry in history:
        value, step = entry.get(key), entry.get("step")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and isinstance(step, (int, float)):
            out.append((float(step), float(value)))
    return out


def nice_range(low: float, high: float) -> tuple[float, float, float]:
    """(low, high, step) widened to round tick values: about four steps of 1, 2, 2.5 or 5 times a power of ten."""
    if high <= low:
        high = low + 1.0
    raw = (high - low) / 4
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw * (1 - 1e-9))
    return math.floor(low / step + 1e-9) * step, math.ceil(high / step - 1e-9) * step, step


def _ticks(low: float, high: float, step: float) -> list[float]:
    return [low + i * step for i in range(round((high - low) / step) + 1)]


def _fmt(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 or value == int(value) else f"{value:g}"


def svg_panel(title: str, history: list[dict], keys: list[str], width: int = 440, height: int = 240) -> str:
    """One panel as an inline SVG: axes with ticks, one polyline (and dots) per metric, a legend."""
    data = {k: series(history, k) for k in keys}
    points = [p for pts in data.values() for p in pts]
    left, right, top, bottom = 58, 12, 26, 36 + 16 * ((len(keys) + 1) // 2)
    plot_w, plot_h = width - left - right, height - top - bottom
    xs, ys = [p[0] for p in points] or [0.0], [p[1] for p in points] or [0.0]
    x0, x1 = min(xs), max(xs)
    y0, y1, y_step = nice_range(min(0.0, min(ys)), max(ys))
    sx = (lambda x: left + plot_w / 2) if x1 == x0 else (lambda x: left + (x - x0) / (x1 - x0) * plot_w)

    def sy(y: float) -> float:
        return top + plot_h - (y - y0) / (y1 - y0) * plot_h

    parts = [
        (f'<svg class="curve" role="img" aria-label="{escape(title)}" viewBox="0 0 {width} {height}" '
         f'width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">'),
        f'<text x="{width / 2}" y="16" text-anchor="middle" class="ctitle">{escape(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" class="frame"/>',
    ]
    for y in _ticks(y0, y1, y_step):
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" class="grid"/>'
                     f'<text x="{left - 4}" y="{sy(y) + 4:.1f}" text-anchor="end" class="tick">{_fmt(y)}</text>')
    x_ticks = _ticks(*nice_range(x0, x1)) if x1 - x0 >= 8 else xs
    for x in sorted({x0, x1, *(x for x in x_ticks if x0 <= x <= x1)}):
        parts.append(f'<text x="{sx(x):.1f}" y="{top + plot_h + 14}" text-anchor="middle" class="tick">'
                     f'{_fmt(round(x))}</text>')
    parts.append(f'<text x="{left + plot_w / 2}" y="{top + plot_h + 27}" text-anchor="middle" '
                 'class="axis">optimizer step</text>')
    y_mid = top + plot_h / 2
    parts.append(f'<text x="12" y="{y_mid:.1f}" text-anchor="middle" class="axis" '
                 f'transform="rotate(-90 12 {y_mid:.1f})">{escape(Y_LABELS.get(title, "value"))}</text>')
    for i, (key, pts) in enumerate(data.items()):
        color = COLORS[i % len(COLORS)]
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        parts.append(f'<polyline class="series" data-key="{escape(key)}" data-points="{len(pts)}" points="{coords}" '
                     f'fill="none" stroke="{color}" stroke-width="2"/>')
        name = escape(metric_name(key))
        parts += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{color}"><title>{name} '
                  f'({escape(key)}) at step {x:g}: {y:.4g}</title></circle>' for x, y in pts]
        lx, ly = left + (i % 2) * plot_w / 2, top + plot_h + 44 + 16 * (i // 2)
        parts.append(f'<g class="legend-item" data-key="{escape(key)}"><title>{escape(key)}</title>'
                     f'<rect x="{lx:.1f}" y="{ly - 9}" width="10" height="10" fill="{color}"/>'
                     f'<text x="{lx + 14:.1f}" y="{ly}" class="legend">{escape(metric_name(key))}'
                     f'{"" if pts else " (no values)"}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def write_pngs(history: list[dict], out_dir: str) -> list[str]:
    """`curves.png` (every panel) and `curve_<name>.png` per panel in `out_dir`; [] when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        logger.warning("PNG plots skipped: install matplotlib (pip install 'rlce-trl[analysis]').")
        return []
    chosen = panels(history)
    if not chosen:
        return []
    written = []

    def draw(ax, title, keys):
        for i, key in enumerate(keys):
            pts = series(history, key)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, color=COLORS[i % len(COLORS)],
                    label=metric_name(key))
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("optimizer step", fontsize=8)
        ax.set_ylabel(Y_LABELS.get(title, "value"), fontsize=8)
        ax.tick_params(labelsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)

    def save(fig, name: str) -> None:
        fig.tight_layout()
        path = os.path.join(out_dir, name)
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)

    cols = min(3, len(chosen))
    rows = (len(chosen) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, (title, keys) in zip(axes.flat, chosen, strict=False):
        draw(ax, title, keys)
    for ax in list(axes.flat)[len(chosen):]:
        ax.axis("off")
    save(fig, CURVES_PNG)
    for title, keys in chosen:
        fig, ax = plt.subplots(figsize=(5, 3.6))
        draw(ax, title, keys)
        save(fig, "curve_" + re.sub(r"\W+", "_", title.lower()).strip("_") + ".png")
    return written
