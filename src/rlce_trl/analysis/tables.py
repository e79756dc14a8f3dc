"""The bench's analyses over logged groups ([`summarize`]) and its tables: markdown, CSV, the simulation table."""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path

from ..evidence.aggregation import mean
from .composition import (
    CurvePoint,
    accuracy_vs_incorrect_fraction,
    accuracy_vs_num_tests,
    as_tests,
    overall_verdict_accuracy,
)
from .reversals import reversal_rate
from .simulation import PAPER_INCORRECT_FRACTION, PAPER_NUM_TESTS, SimulationResult
from .variation import pairwise_ordering, variation_share

REFERENCES = ("usc", "policy_judge")


def summarize(
    records: Sequence[dict],
    methods: Sequence[str] | None = None,
    max_tests: int = 12,
    permutations: int = 20,
    seed: int = 0,
    ties: str = "random",
) -> dict:
    """Every analysis of the bench over logged groups: `{"rows": [one dict per method], "by_num_tests": {method:
    [CurvePoint]}, "by_incorrect_fraction": {method: [CurvePoint]}}`."""
    methods = list(methods or dict.fromkeys(name for record in records for name in record.get("methods", {})))
    rows, by_k, by_fraction = [], {}, {}
    for method in methods:
        logged = [r for r in records if method in r["methods"]]
        entries = [r["methods"][method] for r in logged]
        pairs = [(e["rewards"], r["correct"]) for e, r in zip(entries, logged, strict=True)]
        share = variation_share(pairs)
        ordering = [pairwise_ordering(rewards, correct) for rewards, correct in pairs]
        ordered_pairs = sum(p for p, _, _ in ordering)
        row = {
            "method": method,
            "groups": len(logged),
            "no_reward_frac": mean([float(all(x is None for x in e["rewards"])) for e in entries]),
            "varied_groups": share.groups,
            "variation_share": share.pooled,
            "variation_share_mean": share.mean,
            "pair_correct_higher": sum(u for _, u, _ in ordering) / ordered_pairs if ordered_pairs else None,
        }
        for ref in REFERENCES:  # a reference never reverses itself: no rate, no cases
            rate = reversal_rate((r["methods"][ref]["rewards"], r["methods"][method]["rewards"], r["correct"])
                                 for r in logged if ref in r["methods"] and ref != method)
            row[f"reverses_{ref}"], row[f"reverses_{ref}_cases"] = rate.rate, rate.cases
        tests = [(as_tests(e["tests"]), [bool(c) for c in e["answer_correct"]])
                 for e in entries if e.get("tests") and e.get("answer_correct") is not None]
        row["verdict_accuracy"], row["verdict_groups"] = overall_verdict_accuracy(tests, ties)
        for cost in ("calls", "requests", "tokens", "prompt_chars"):
            row[f"{cost}_per_group"] = mean([e[cost] for e in entries if e.get(cost) is not None])
        rows.append(row)
        if tests:
            by_k[method] = accuracy_vs_num_tests(tests, max_tests, permutations, seed, ties)
            by_fraction[method] = accuracy_vs_incorrect_fraction(tests, ties=ties)
    return {"rows": rows, "by_num_tests": by_k, "by_incorrect_fraction": by_fraction}


# -- tables -----------------------------------------------------------------------------------------------------------
_PERCENT = {"no_reward_frac", "variation_share", "variation_share_mean", "pair_correct_higher", "verdict_accuracy"}
_COLUMNS = [
    ("method", "method"),
    ("groups", "groups"),
    ("no_reward_frac", "no reward"),
    ("varied_groups", "varied groups"),
    ("variation_share", "variation correct/incorrect (pooled)"),
    ("variation_share_mean", "(mean per group)"),
    ("pair_correct_higher", "correct ranked higher"),
    ("reverses_usc", "reverses USC"),
    ("reverses_usc_cases", "USC errors"),
    ("reverses_policy_judge", "reverses Judge"),
    ("reverses_policy_judge_cases", "Judge errors"),
    ("verdict_accuracy", "verdict acc."),
    ("calls_per_group", "calls/group"),
    ("requests_per_group", "requests/group"),
    ("tokens_per_group", "gen. tokens/group"),
    ("prompt_chars_per_group", "prompt chars/group"),
]


def _fmt(key: str, value) -> str:
    if value is None:
        return "–"
    if key in _PERCENT or key.startswith("reverses_") and not key.endswith("_cases"):
        return f"{100 * value:.1f}%"
    if isinstance(value, float):
        return f"{value:.1f}" if value >= 10 or value == int(value) else f"{value:.2f}"
    return str(value)


def markdown_table(rows: Sequence[dict]) -> str:
    """The summary as a markdown table (percentages with one decimal; – where a number does not apply)."""
    keys = [k for k, _ in _COLUMNS if any(k in row for row in rows)]
    names = dict(_COLUMNS)
    lines = ["| " + " | ".join(names[k] for k in keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(_fmt(k, row.get(k)) for k in keys) + " |" for row in rows]
    return "\n".join(lines)


def _curve_rows(curves: dict[str, list[CurvePoint]], x_name: str) -> list[dict]:
    return [{"method": m, x_name: p.x, "accuracy": p.accuracy, "groups": p.groups}
            for m, points in curves.items() for p in points]


def _write_csv(rows: Sequence[dict], path: Path) -> None:
    fields = dict.fromkeys(key for row in rows for key in row)  # every row's keys, in order of first appearance
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields))
        writer.writeheader()
        writer.writerows(rows)


def write_tables(summary: dict, out_dir: str | os.PathLike) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "summary.md", out / "summary.csv", out / "composition.csv", out / "incorrect_tests.csv"]
    text = ["# Reward-analysis bench", "", markdown_table(summary["rows"]), ""]
    for title, key in (("Verdict accuracy vs composed tests", "by_num_tests"),
                       ("Verdict accuracy vs fraction of incorrect tests", "by_incorrect_fraction")):
        for method, points in summary[key].items():
            cells = ", ".join(
                f"{p.x}: {'–' if p.accuracy is None else f'{100 * p.accuracy:.0f}%'} (n={p.groups})" for p in points
            )
            text.append(f"- {title}, {method}: {cells}")
    paths[0].write_text("\n".join(text) + "\n")
    _write_csv(summary["rows"], paths[1])
    _write_csv(_curve_rows(summary["by_num_tests"], "tests"), paths[2])
    _write_csv(_curve_rows(summary["by_incorrect_fraction"], "incorrect_tests"), paths[3])
    return paths


def simulation_table(results: Sequence[SimulationResult]) -> str:
    """Markdown: accuracy at each number of tests per error rate, the paper's points beside them; then the same by
    fraction of incorrect tests."""
    tables = []
    for attr, paper, head, counts in (("by_num_tests", PAPER_NUM_TESTS, "k={}", False),
                                      ("by_incorrect_fraction", PAPER_INCORRECT_FRACTION, "{}", True)):
        xs = [p.x for p in getattr(results[0], attr)]
        lines = ["| error rate | " + " | ".join(head.format(x) for x in xs) + " |", "|" + "---|" * (len(xs) + 1)]
        for result in results:
            cells = ["–" if p.accuracy is None else f"{100 * p.accuracy:.1f}%" + (f" (n={p.groups})" if counts else "")
                     for p in getattr(result, attr)]
            lines.append(f"| {result.error_rate:.0%} | " + " | ".join(cells) + " |")
        for task, points in paper.items():
            cells = [f"{100 * points[x]:.0f}%" if x in points else "" for x in xs]
            lines.append(f"| paper {task} | " + " | ".join(cells) + " |")
        tables.append("\n".join(lines))
    return "\n\n".join(tables)
