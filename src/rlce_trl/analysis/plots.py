"""PNG plots of the bench and of the simulation (matplotlib, `pip install rlce-trl[analysis]`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from .simulation import PAPER_INCORRECT_FRACTION, PAPER_NUM_TESTS, SimulationResult
from .tables import REFERENCES


def _subplots(*args, figsize: tuple[float, float], **kwargs):
    """`pyplot.subplots` without pyplot: an off-screen figure that nothing holds (no display, nothing to close)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(*args, **kwargs)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def _bars(ax, names: Sequence[str], values: Sequence[float | None], counts: Sequence[int], color: str) -> None:
    """Percentage bars, each with its number of cases above it."""
    heights = [0.0 if v is None else 100 * v for v in values]
    ax.bar(names, heights, color=color)
    for k, (height, n) in enumerate(zip(heights, counts, strict=True)):
        ax.text(k, height + 1.5, f"n={n}", ha="center", fontsize=8)
    ax.set_ylim(0, 110)


def plot_bench(summary: dict, out_dir: str | os.PathLike) -> list[Path]:
    """PNG plots of the bench: variation share, reversal rates, composition curves, cost. Needs matplotlib
    (`pip install rlce-trl[analysis]`)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = summary["rows"]
    names = [r["method"] for r in rows]

    fig, ax = _subplots(figsize=(6.5, 3.8))
    _bars(ax, names, [r["variation_share"] for r in rows], [r["varied_groups"] for r in rows], "#4C72B0")
    ax.set_ylabel("% of reward variation")
    ax.set_title("Reward variation between correct and incorrect rollouts")
    paths = [_save(fig, out / "variation.png")]

    fig, axes = _subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, ref, title in zip(axes, REFERENCES, ("USC", "Policy LLM-Judge"), strict=True):
        shown = [r for r in rows if r["method"] != ref and f"reverses_{ref}" in r]
        _bars(ax, [r["method"] for r in shown], [r[f"reverses_{ref}"] for r in shown],
              [r[f"reverses_{ref}_cases"] for r in shown], "#DD8452")
        ax.set_title(f"Reverses {title}'s wrong preferences")
        ax.tick_params(axis="x", labelrotation=30)
    axes[0].set_ylabel("% of wrong preferences reversed")
    paths.append(_save(fig, out / "reversals.png"))

    if summary["by_num_tests"]:
        fig, axes = _subplots(1, 2, figsize=(10, 3.8))
        _composition(axes, summary["by_num_tests"], summary["by_incorrect_fraction"], fontsize=8, counts=True,
                     titles=("Verdict accuracy vs number of tests", "Verdict accuracy vs incorrect tests"),
                     incorrect_label="fraction of incorrect tests")
        paths.append(_save(fig, out / "composition.png"))

    fig, axes = _subplots(1, 2, figsize=(10, 3.8))
    for ax, key, title in ((axes[0], "requests_per_group", "verifier requests per group"),
                           (axes[1], "tokens_per_group", "generated tokens per group")):
        ax.bar(names, [r.get(key) or 0.0 for r in rows], color="#55A868")
        ax.set_title(title)
        ax.tick_params(axis="x", labelrotation=30)
    paths.append(_save(fig, out / "cost.png"))
    return paths


def _composition(axes, curves: dict, bars: dict, *, titles: tuple[str, str], incorrect_label: str, fontsize: int,
                 counts: bool = False) -> None:
    """The two composition panels beside the paper's points: verdict accuracy vs the number of composed tests (one
    curve per entry of `curves`), and vs the fraction of incorrect tests (grouped bars, one per entry of `bars`;
    `counts` writes each bar's number of groups). Values are lists of `CurvePoint`."""
    for name, points in curves.items():
        shown = [p for p in points if p.accuracy is not None]
        axes[0].plot([p.x for p in shown], [100 * p.accuracy for p in shown], marker="o", label=name)
    for (task, points), style in zip(PAPER_NUM_TESTS.items(), ("k--", "k:"), strict=True):
        xs = sorted(points)
        axes[0].plot(xs, [100 * points[x] for x in xs], style, marker="s", alpha=0.6,
                     label=f"paper, {task} (1 and 12)")
    axes[0].set_xlabel("evidence tests composed")
    axes[0].set_ylabel("verdict accuracy (%)")
    axes[0].set_title(titles[0])
    axes[0].legend(fontsize=fontsize)
    width = 0.8 / max(len(bars), 1)
    for m, (name, points) in enumerate(bars.items()):
        xs = [k + (m - (len(bars) - 1) / 2) * width for k in range(len(points))]
        heights = [0.0 if p.accuracy is None else 100 * p.accuracy for p in points]
        axes[1].bar(xs, heights, width=width, label=name)
        if counts:
            for x, height, p in zip(xs, heights, points, strict=True):
                axes[1].text(x, height + 1.5, f"n={p.groups}", ha="center", fontsize=7)
    labels = [p.x for p in next(iter(bars.values()))]
    axes[1].set_xticks(range(len(labels)), labels)
    for (task, points), marker in zip(PAPER_INCORRECT_FRACTION.items(), ("s", "D"), strict=True):
        xs = [labels.index(b) for b in points if b in labels]
        axes[1].scatter(xs, [100 * points[b] for b in points if b in labels], marker=marker, color="k", zorder=3,
                        label=f"paper, {task}")
    axes[1].set_xlabel(incorrect_label)
    axes[1].set_ylabel("verdict accuracy (%)")
    axes[1].set_ylim(0, 110)
    axes[1].set_title(titles[1])
    axes[1].legend(fontsize=fontsize)


def plot_simulation(results: Sequence[SimulationResult], path: str | os.PathLike, title: str = "") -> Path:
    """The simulation beside the paper's measured points: accuracy vs composed tests (left) and vs the fraction of
    incorrect tests (right), one curve per validator error rate."""
    fig, axes = _subplots(1, 2, figsize=(10, 3.8))
    _composition(axes, {f"simulated, error {r.error_rate:.0%}": r.by_num_tests for r in results},
                 {f"error {r.error_rate:.0%}": r.by_incorrect_fraction for r in results}, fontsize=7,
                 titles=("Accuracy vs number of composed tests", "Accuracy vs incorrect tests"),
                 incorrect_label="fraction of incorrect tests (realized)")
    if title:
        fig.suptitle(title, fontsize=10)
    return _save(fig, Path(path))
