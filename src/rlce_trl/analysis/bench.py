"""The reward-analysis bench: compare label-free reward methods on the same logged rollout groups (paper sections
4.2-4.3), with their verifier cost.

Gold labels are used here for evaluation only; no reward ever sees them.

## Logged-groups format (JSONL, one line per rollout group)

```json
{"prompt_id": "s0001",
 "gold": "humour",
 "labels": ["humour", "not humour"],               // null for free text
 "rollouts": ["humour", null, "not humour", ...],  // the extracted \\boxed{} answer of each rollout, or null
 "correct": [true, false, false, ...],             // per rollout, judged against gold (evaluation only)
 "methods": {
   "rlce": {
     "rewards": [1.0, 0.0, 0.0, ...],              // the task reward per rollout (GroupResult.verified), null = none
     "status": "verified",
     "answers": ["humour", "not humour"],          // the method's distinct answers
     "assignment": [0, null, 1, ...],              // answer index of each rollout
     "answer_correct": [true, false],              // per distinct answer, judged against gold
     "verified_answer": "humour",
     "tests": [{"favoured": 0, "against": 1, "verdict": "yes", "tie_break": false}, ...],  // RLCE family only
     "calls": 2, "requests": 4, "tokens": 37, "prompt_chars": 5120   // verifier cost of this group
   },
   "usc": {...}, "policy_judge": {...}, "rar": {...}, "rler": {...}
 }}
```

`tests[*].favoured` / `against` index the method's own `answers`; `against` is null for pointwise tests; `verdict` is
"yes" / "no" / "unknown" or null (unreadable). A file from a real run is produced by [`log_groups`], which runs
several scorers over the same groups with one verifier; any other producer only has to write these fields (`tests`,
`answer_correct` and the cost fields are optional; `correct` is required).

## What the bench reports, per method

- the share of reward variation between correct and incorrect rollouts ([`rlce_trl.analysis.variation`]);
- how often it reverses the wrong preferences of USC and of the Policy LLM-Judge ([`rlce_trl.analysis.reversals`]);
- for methods with logged tests, aggregate-verdict accuracy versus the number of composed tests and versus the
  fraction of incorrect tests ([`rlce_trl.analysis.composition`]);
- cost: verifier calls (batched `generate` calls), requests, generated tokens and prompt characters per group.

[`main`] writes `summary.md`, `summary.csv`, `composition.csv`, `incorrect_tests.csv` and PNG plots; with
`--simulate` it runs the synthetic-validator simulation ([`rlce_trl.analysis.simulation`]) instead, and with
`--synthetic N` it first writes a logged-groups file from N synthetic groups scored by the real scorers with a
synthetic verifier.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from ..evidence.answers import extract_boxed, match_label, normalize_answer
from ..evidence.pipeline import EvidenceSettings
from ..evidence.state import Group
from ..verifiers.base import Reply, Request, Verifier
from .composition import (
    CurvePoint,
    accuracy_vs_incorrect_fraction,
    accuracy_vs_num_tests,
    as_tests,
    overall_verdict_accuracy,
)
from .reversals import reversal_rate
from .simulation import (
    PAPER_INCORRECT_FRACTION,
    PAPER_NUM_TESTS,
    SimulationResult,
    SyntheticVerifier,
    exact_single_test_accuracy,
    simulate_composition,
    synthetic_groups,
)
from .variation import pairwise_ordering, variation_share

logger = logging.getLogger(__name__)

DEFAULT_METHODS = ("rlce", "usc", "policy_judge", "ttrl", "rar", "rler")
REFERENCES = ("usc", "policy_judge")
CorrectFn = Callable[[str | None, str, Sequence[str] | None], bool]


# -- producing a log ---------------------------------------------------------------------------------------------------
def default_correct(answer: str | None, gold: str, labels: Sequence[str] | None) -> bool:
    """Closed labels: the answer maps to the gold label; free text: same normal form as gold. Pass your own
    `correct_fn` for anything finer (MOSEI's polarity collapse, an LLM judge for free text)."""
    if answer is None:
        return False
    if labels:
        return match_label(answer, labels) is not None and match_label(answer, labels) == match_label(gold, labels)
    return normalize_answer(answer) == normalize_answer(gold)


class CountingVerifier(Verifier):
    """Passes requests to `inner` and counts them, with the characters of their prompts (a proxy for prompt tokens,
    which backends do not report)."""

    def __init__(self, inner: Verifier):
        super().__init__()
        self.inner = inner
        self.name = inner.name
        self.supports_structured_output = inner.supports_structured_output
        self.prompt_chars = 0

    def _generate(self, requests: list[Request]) -> list[Reply]:
        self.prompt_chars += sum(len(m["content"]) for r in requests for m in r.messages)
        return self.inner.generate(requests)


def log_groups(
    groups: Sequence[Group],
    golds: Sequence[str],
    verifier: Verifier,
    methods: Sequence[str] = DEFAULT_METHODS,
    settings: EvidenceSettings | None = None,
    options: dict[str, dict] | None = None,
    prompt_ids: Sequence[str] | None = None,
    correct_fn: CorrectFn = default_correct,
    per_group: bool = True,
    keep_test_text: bool = False,
) -> list[dict]:
    """Run every method of `methods` (names of [`rlce_trl.baselines.REWARD_METHODS`]) over the same groups with one
    verifier and return the logged-groups records (format in the module docstring).

    Args:
        per_group: score each group in its own `score([group])` call, so that every group's verifier cost is exact.
            The trainer batches all groups of a step into one call per stage; the requests and tokens are the same,
            only the number of calls differs. `False` scores all groups in one step and spreads the cost evenly.
        options: per-method keyword options for the scorer factories, e.g. `{"rler": {"max_active": 5}}`.
        keep_test_text: also log the text of every test.
    """
    from ..baselines import build_scorer  # the registry imports the scorers; analysis stays importable without it

    counting = CountingVerifier(verifier)
    records = []
    for k, (group, gold) in enumerate(zip(groups, golds)):
        rollouts = [extract_boxed(c) for c in group.completions]
        if group.labels:
            rollouts = [match_label(a, group.labels) if a is not None else None for a in rollouts]
        records.append({
            "prompt_id": prompt_ids[k] if prompt_ids is not None else group.prompt_key,
            "gold": gold,
            "labels": list(group.labels) if group.labels else None,
            "rollouts": rollouts,
            "correct": [correct_fn(a, gold, group.labels) for a in rollouts],
            "methods": {},
        })
    for name in methods:
        scorer = build_scorer(name, counting, settings, **(options or {}).get(name, {}))
        batches = [[k] for k in range(len(groups))] if per_group else [list(range(len(groups)))]
        for batch in batches:
            before, chars = counting.stats.snapshot(), counting.prompt_chars
            results, _ = scorer.score([groups[k] for k in batch])
            work = counting.stats.since(before)
            share = 1 / len(batch)
            for k, result in zip(batch, results):
                group, gold = groups[k], golds[k]
                entry = {
                    "rewards": list(result.verified),
                    "status": result.status,
                    "answers": list(result.answers),
                    "assignment": list(result.assignment),
                    "answer_correct": [correct_fn(a, gold, group.labels) for a in result.answers],
                    "verified_answer": result.verified_answer,
                    "calls": work.calls * share,
                    "requests": work.requests * share,
                    "tokens": work.generated_tokens * share,
                    "prompt_chars": (counting.prompt_chars - chars) * share,
                }
                if result.tests:
                    entry["tests"] = [
                        {"favoured": t.favoured, "against": t.against, "verdict": t.verdict, "tie_break": t.tie_break,
                         **({"text": t.text} if keep_test_text else {})}
                        for t in result.tests
                    ]
                records[k]["methods"][name] = entry
    return records


def write_jsonl(records: Sequence[dict], path: str | os.PathLike) -> None:
    with open(path, "w") as f:
        f.writelines(json.dumps(record) + "\n" for record in records)


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# -- the analyses ------------------------------------------------------------------------------------------------------
def _methods_in(records: Sequence[dict]) -> list[str]:
    seen: dict[str, None] = {}
    for record in records:
        for name in record.get("methods", {}):
            seen.setdefault(name, None)
    return list(seen)


def _test_groups(records: Sequence[dict], method: str) -> list[tuple[list, list[bool]]]:
    out = []
    for record in records:
        entry = record["methods"].get(method)
        if entry and entry.get("tests") and entry.get("answer_correct") is not None:
            out.append((as_tests(entry["tests"]), [bool(c) for c in entry["answer_correct"]]))
    return out


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize(
    records: Sequence[dict],
    methods: Sequence[str] | None = None,
    references: Sequence[str] = REFERENCES,
    max_tests: int = 12,
    permutations: int = 20,
    seed: int = 0,
    ties: str = "random",
) -> dict:
    """Every analysis of the bench over logged groups: `{"rows": [one dict per method], "by_num_tests": {method:
    [CurvePoint]}, "by_incorrect_fraction": {method: [CurvePoint]}}`."""
    methods = list(methods) if methods else _methods_in(records)
    rows, by_k, by_fraction = [], {}, {}
    for method in methods:
        logged = [r for r in records if method in r["methods"]]
        pairs = [(r["methods"][method]["rewards"], r["correct"]) for r in logged]
        share = variation_share(pairs)
        ordering = [pairwise_ordering(rewards, correct) for rewards, correct in pairs]
        ordered_pairs = sum(p for p, _, _ in ordering)
        row = {
            "method": method,
            "groups": len(logged),
            "no_reward_frac": _mean([float(all(x is None for x in r["methods"][method]["rewards"])) for r in logged]),
            "varied_groups": share.groups,
            "variation_share": share.pooled,
            "variation_share_mean": share.mean,
            "pair_correct_higher": sum(u for _, u, _ in ordering) / ordered_pairs if ordered_pairs else None,
        }
        for ref in references:
            if ref == method:
                row[f"reverses_{ref}"], row[f"reverses_{ref}_cases"] = None, 0
                continue
            both = [r for r in logged if ref in r["methods"]]
            rate = reversal_rate(
                (r["methods"][ref]["rewards"], r["methods"][method]["rewards"], r["correct"]) for r in both
            )
            row[f"reverses_{ref}"], row[f"reverses_{ref}_cases"] = rate.rate, rate.cases
        tests = _test_groups(logged, method)
        accuracy, verdict_groups = overall_verdict_accuracy(tests, ties) if tests else (None, 0)
        row["verdict_accuracy"], row["verdict_groups"] = accuracy, verdict_groups
        for cost in ("calls", "requests", "tokens", "prompt_chars"):
            values = [r["methods"][method][cost] for r in logged if r["methods"][method].get(cost) is not None]
            row[f"{cost}_per_group"] = _mean(values)
        rows.append(row)
        if tests:
            by_k[method] = accuracy_vs_num_tests(tests, max_tests, permutations, seed, ties)
            by_fraction[method] = accuracy_vs_incorrect_fraction(tests, ties=ties)
    return {"rows": rows, "by_num_tests": by_k, "by_incorrect_fraction": by_fraction}


# -- tables ------------------------------------------------------------------------------------------------------------
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
    for row in rows:
        lines.append("| " + " | ".join(_fmt(k, row.get(k)) for k in keys) + " |")
    return "\n".join(lines)


def _curve_rows(curves: dict[str, list[CurvePoint]], x_name: str) -> list[dict]:
    return [
        {"method": m, x_name: p.x, "accuracy": p.accuracy, "groups": p.groups} for m, points in curves.items()
        for p in points
    ]


def _write_csv(rows: Sequence[dict], path: Path) -> None:
    fields: dict[str, None] = {}
    for row in rows:
        fields.update(dict.fromkeys(row))
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields))
        writer.writeheader()
        writer.writerows(rows)


def write_tables(summary: dict, out_dir: str | os.PathLike) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "summary.md", out / "summary.csv", out / "composition.csv", out / "incorrect_tests.csv"]
    text = ["# Reward-analysis bench", "", markdown_table(summary["rows"]), ""]
    for title, key, x_name in (("Verdict accuracy vs composed tests", "by_num_tests", "tests"),
                               ("Verdict accuracy vs fraction of incorrect tests", "by_incorrect_fraction",
                                "incorrect_tests")):
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


# -- plots -------------------------------------------------------------------------------------------------------------
def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def plot_bench(summary: dict, out_dir: str | os.PathLike) -> list[Path]:
    """PNG plots of the bench: variation share, reversal rates, composition curves, cost. Needs matplotlib
    (`pip install rlce-trl[analysis]`)."""
    plt = _pyplot()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = summary["rows"]
    names = [r["method"] for r in rows]
    paths = []

    def pct(values):
        return [0.0 if v is None else 100 * v for v in values]

    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    ax.bar(names, pct([r["variation_share"] for r in rows]), color="#4C72B0")
    ax.set_ylabel("% of reward variation")
    ax.set_title("Reward variation between correct and incorrect rollouts")
    ax.set_ylim(0, 110)
    for k, r in enumerate(rows):
        ax.text(k, pct([r["variation_share"]])[0] + 1.5, f"n={r['varied_groups']}", ha="center", fontsize=8)
    fig.tight_layout()
    paths.append(out / "variation.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, ref, title in zip(axes, REFERENCES, ("USC", "Policy LLM-Judge")):
        shown = [r for r in rows if r["method"] != ref and f"reverses_{ref}" in r]
        ax.bar([r["method"] for r in shown], pct([r[f"reverses_{ref}"] for r in shown]), color="#DD8452")
        for k, r in enumerate(shown):
            ax.text(k, pct([r[f"reverses_{ref}"]])[0] + 1.5, f"n={r[f'reverses_{ref}_cases']}", ha="center",
                    fontsize=8)
        ax.set_title(f"Reverses {title}'s wrong preferences")
        ax.set_ylim(0, 110)
        ax.tick_params(axis="x", labelrotation=30)
    axes[0].set_ylabel("% of wrong preferences reversed")
    fig.tight_layout()
    paths.append(out / "reversals.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    if summary["by_num_tests"]:
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        for method, points in summary["by_num_tests"].items():
            xs = [p.x for p in points if p.accuracy is not None]
            axes[0].plot(xs, [100 * p.accuracy for p in points if p.accuracy is not None], marker="o", label=method)
        _paper_num_tests(axes[0])
        axes[0].set_xlabel("evidence tests composed")
        axes[0].set_ylabel("verdict accuracy (%)")
        axes[0].set_title("Verdict accuracy vs number of tests")
        axes[0].legend(fontsize=8)
        width = 0.8 / max(len(summary["by_incorrect_fraction"]), 1)
        for m, (method, points) in enumerate(summary["by_incorrect_fraction"].items()):
            xs = [k + (m - (len(summary["by_incorrect_fraction"]) - 1) / 2) * width for k in range(len(points))]
            axes[1].bar(xs, pct([p.accuracy for p in points]), width=width, label=method)
            for x, p in zip(xs, points):
                axes[1].text(x, pct([p.accuracy])[0] + 1.5, f"n={p.groups}", ha="center", fontsize=7)
        labels = [p.x for p in next(iter(summary["by_incorrect_fraction"].values()))]
        axes[1].set_xticks(range(len(labels)), labels)
        _paper_incorrect(axes[1], labels)
        axes[1].set_xlabel("fraction of incorrect tests")
        axes[1].set_ylabel("verdict accuracy (%)")
        axes[1].set_ylim(0, 110)
        axes[1].set_title("Verdict accuracy vs incorrect tests")
        axes[1].legend(fontsize=8)
        fig.tight_layout()
        paths.append(out / "composition.png")
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, key, title in ((axes[0], "requests_per_group", "verifier requests per group"),
                           (axes[1], "tokens_per_group", "generated tokens per group")):
        ax.bar(names, [r.get(key) or 0.0 for r in rows], color="#55A868")
        ax.set_title(title)
        ax.tick_params(axis="x", labelrotation=30)
    fig.tight_layout()
    paths.append(out / "cost.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    return paths


def _paper_num_tests(ax) -> None:
    for (task, points), style in zip(PAPER_NUM_TESTS.items(), ("k--", "k:")):
        xs = sorted(points)
        ax.plot(xs, [100 * points[x] for x in xs], style, marker="s", alpha=0.6, label=f"paper, {task} (1 and 12)")


def _paper_incorrect(ax, labels: Sequence[str]) -> None:
    for (task, points), marker in zip(PAPER_INCORRECT_FRACTION.items(), ("s", "D")):
        xs = [labels.index(b) for b in points if b in labels]
        ax.scatter(xs, [100 * points[b] for b in points if b in labels], marker=marker, color="k", zorder=3,
                   label=f"paper, {task}")


def plot_simulation(results: Sequence[SimulationResult], path: str | os.PathLike, title: str = "") -> Path:
    """The simulation beside the paper's measured points: accuracy vs composed tests (left) and vs the fraction of
    incorrect tests (right), one curve per validator error rate."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for result in results:
        points = [p for p in result.by_num_tests if p.accuracy is not None]
        axes[0].plot([p.x for p in points], [100 * p.accuracy for p in points], marker="o",
                     label=f"simulated, error {result.error_rate:.0%}")
    _paper_num_tests(axes[0])
    axes[0].set_xlabel("evidence tests composed")
    axes[0].set_ylabel("verdict accuracy (%)")
    axes[0].set_title("Accuracy vs number of composed tests")
    axes[0].legend(fontsize=7)
    labels = [p.x for p in results[0].by_incorrect_fraction]
    width = 0.8 / max(len(results), 1)
    for m, result in enumerate(results):
        xs = [k + (m - (len(results) - 1) / 2) * width for k in range(len(labels))]
        axes[1].bar(xs, [0 if p.accuracy is None else 100 * p.accuracy for p in result.by_incorrect_fraction],
                    width=width, label=f"error {result.error_rate:.0%}")
    axes[1].set_xticks(range(len(labels)), labels)
    _paper_incorrect(axes[1], labels)
    axes[1].set_xlabel("fraction of incorrect tests (realized)")
    axes[1].set_ylabel("verdict accuracy (%)")
    axes[1].set_ylim(0, 110)
    axes[1].set_title("Accuracy vs incorrect tests")
    axes[1].legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def simulation_table(results: Sequence[SimulationResult]) -> str:
    """Markdown: accuracy at each number of tests per error rate, the paper's points beside them."""
    ks = [p.x for p in results[0].by_num_tests]
    lines = ["| error rate | " + " | ".join(f"k={k}" for k in ks) + " |", "|" + "---|" * (len(ks) + 1)]
    for result in results:
        cells = ["–" if p.accuracy is None else f"{100 * p.accuracy:.1f}%" for p in result.by_num_tests]
        lines.append(f"| {result.error_rate:.0%} | " + " | ".join(cells) + " |")
    for task, points in PAPER_NUM_TESTS.items():
        lines.append(f"| paper {task} | " + " | ".join(
            f"{100 * points[k]:.0f}%" if k in points else "" for k in ks) + " |")
    lines += ["", "| error rate | " + " | ".join(p.x for p in results[0].by_incorrect_fraction) + " |",
              "|" + "---|" * (len(results[0].by_incorrect_fraction) + 1)]
    for result in results:
        cells = ["–" if p.accuracy is None else f"{100 * p.accuracy:.1f}% (n={p.groups})"
                 for p in result.by_incorrect_fraction]
        lines.append(f"| {result.error_rate:.0%} | " + " | ".join(cells) + " |")
    for task, points in PAPER_INCORRECT_FRACTION.items():
        lines.append(f"| paper {task} | " + " | ".join(
            f"{100 * points[p.x]:.0f}%" if p.x in points else "" for p in results[0].by_incorrect_fraction) + " |")
    return "\n".join(lines)


# -- command line ------------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlce-trl analyze",
        description="Reward-analysis bench over logged rollout groups with gold labels (evaluation only), or the "
        "synthetic-validator simulation.",
    )
    parser.add_argument("log", nargs="?", help="logged-groups JSONL (format: rlce_trl.analysis.bench docstring)")
    parser.add_argument("--out", required=True, help="output folder for tables and PNGs")
    parser.add_argument("--methods", nargs="+", help="methods to report (default: all in the log)")
    parser.add_argument("--max-tests", type=int, default=12, help="largest number of composed tests")
    parser.add_argument("--permutations", type=int, default=20, help="random test orders per group")
    parser.add_argument("--ties", choices=("random", "wrong"), default="random",
                        help="credit of a tied verdict: expected credit of a uniform tie-break, or 0")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-plots", action="store_true", help="tables only (no matplotlib needed)")
    sim = parser.add_argument_group("simulation")
    sim.add_argument("--simulate", action="store_true", help="run the synthetic-validator simulation")
    sim.add_argument("--error-rates", type=float, nargs="+", default=[0.2, 0.3, 0.4])
    sim.add_argument("--trials", type=int, default=2000, help="synthetic examples per error rate")
    sim.add_argument("--num-answers", type=int, default=2)
    sim.add_argument("--tests-per-direction", type=int, default=6)
    sim.add_argument("--abstain-rate", type=float, default=0.0)
    sim.add_argument("--concentration", type=float, default=None,
                     help="per-example error rate ~ Beta(k e, k (1 - e)); default: the same e for every example")
    syn = parser.add_argument_group("synthetic log")
    syn.add_argument("--synthetic", type=int, metavar="N",
                     help="first write <out>/synthetic_groups.jsonl: N synthetic groups scored by every method with "
                     "a synthetic verifier (error rate: the first of --error-rates), then analyze it")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.simulate:
        results = simulate_composition(
            args.error_rates, args.max_tests, args.trials, args.num_answers, args.tests_per_direction,
            args.abstain_rate, args.concentration, seed=args.seed, ties=args.ties,
        )
        table = simulation_table(results)
        closed = ", ".join(f"{e:.0%}: {100 * exact_single_test_accuracy(e):.1f}%" for e in args.error_rates)
        (out / "simulation.md").write_text(
            f"# Simulated aggregate-verdict accuracy\n\n{args.trials} examples per error rate, {args.num_answers} "
            f"answers, {args.tests_per_direction} tests per direction, abstain rate {args.abstain_rate}, "
            f"concentration {args.concentration}.\n\n{table}\n\nClosed form at k=1 (two answers): {closed}.\n"
        )
        print(table)
        if not args.no_plots:
            title = f"synthetic validator, concentration={args.concentration}" if args.concentration else ""
            print(plot_simulation(results, out / "simulation.png", title))
        return 0
    log = args.log
    if args.synthetic:
        made = synthetic_groups(args.synthetic, seed=args.seed)
        verifier = SyntheticVerifier({pid: gold for pid, gold, _ in made}, error_rate=args.error_rates[0],
                                     concentration=args.concentration, seed=args.seed)
        records = log_groups([g for _, _, g in made], [gold for _, gold, _ in made], verifier,
                             settings=EvidenceSettings(tests_per_direction=args.tests_per_direction),
                             prompt_ids=[pid for pid, _, _ in made])
        log = out / "synthetic_groups.jsonl"
        write_jsonl(records, log)
        print(f"wrote {log}")
    if log is None:
        build_parser().error("give a logged-groups JSONL, --synthetic N or --simulate")
    records = read_jsonl(log)
    summary = summarize(records, args.methods, max_tests=args.max_tests, permutations=args.permutations,
                        seed=args.seed, ties=args.ties)
    for path in write_tables(summary, out):
        print(path)
    print(markdown_table(summary["rows"]))
    if not args.no_plots:
        for path in plot_bench(summary, out):
            print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
