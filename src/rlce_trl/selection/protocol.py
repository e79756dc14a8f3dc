"""The select protocol (next-capabilities §3.3): every selector on the same pool, budgets b <= n by seeded random
b-subsets, per-row results appended to `selections.jsonl` (a rerun resumes), then a summary per selector and budget:
accuracy, paired bootstrap CI of the difference to majority, reversal rate (majority wrong, a correct candidate
exists: how often the selector is right), harm rate (majority right: how often the selector is wrong), fallback rate,
mean candidates used, verifier calls / tokens / seconds per row.

Bad input never stops a run: pool lines that cannot be read, candidates without an extractable answer, rows with
fewer candidates than a budget (skipped for that budget), and a selector failing on a row (that row gets the
majority answer, status `error`) are all counted in the summary.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ..data.jsonl import append_jsonl, read_jsonl_lenient, repair_jsonl_tail
from ..errors import first_line
from .pool import PoolRow
from .selectors import Selection, majority_answer

SELECTIONS_FILE = "selections.jsonl"


def budget_subsets(row_id: str, n: int, budget: int, subsets: int, seed: int = 0) -> list[list[int]]:
    """The candidate index lists of one row for one budget: all n in order when b == n, else `subsets` seeded random
    b-subsets (in drawn order; Elect consumes them in that order)."""
    if budget >= n:
        return [list(range(n))]
    rng = random.Random(f"{seed}:{row_id}:{budget}")
    return [rng.sample(range(n), budget) for _ in range(subsets)]


def _run_selector(selector, items) -> tuple[list[Selection], dict[str, str]]:
    """Selections for all items; when the batched call fails, item by item: a failing row gets the majority answer
    with status `error`. Returns the selections and, per failing row id, its first failure as one line."""
    try:
        out = selector.select(items)
        if len(out) != len(items):
            raise RuntimeError(f"{len(out)} selections for {len(items)} items")
        return out, {}
    except Exception:  # noqa: BLE001 - a selector's failure is data, reported per row
        out, failures = [], {}
        for row, subset in items:
            try:
                (selection,) = selector.select([(row, subset)])
                out.append(selection)
            except Exception as error:  # noqa: BLE001
                failures.setdefault(row.id, f"{type(error).__name__}: {first_line(error)}")
                out.append(Selection(majority_answer([row.candidates[i].answer for i in subset]), "error",
                                     len(subset)))
        return out, failures


def select_rows(rows: Sequence[PoolRow], selectors: Sequence, budgets: Sequence[int], output_dir: str | os.PathLike,
                subsets: int = 5, seed: int = 0, chunk_size: int = 16, log: Callable[[str], None] = print) -> Path:
    """Run every selector on every row and budget; append one JSON line per row to `output_dir/selections.jsonl`."""
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    path = Path(output_dir) / SELECTIONS_FILE
    repair_jsonl_tail(path)
    done = {r["id"] for r in read_jsonl_lenient(path)[0] if "id" in r} if path.exists() else set()
    todo = [r for r in rows if r.id not in done]
    for start in range(0, len(todo), chunk_size):
        chunk = todo[start : start + chunk_size]
        records = {r.id: {"id": r.id, "gold": r.gold, "n": len(r.candidates), "results": {}, "cost": {}}
                   for r in chunk}
        for selector in selectors:
            verifier = getattr(selector, "verifier", None) or getattr(selector, "referee", None)
            before = verifier.stats.snapshot() if verifier is not None else None
            started = time.perf_counter()
            for b in budgets:
                items = [(r, s) for r in chunk if len(r.candidates) >= b
                         for s in budget_subsets(r.id, len(r.candidates), b, subsets, seed)]
                selections, failures = _run_selector(selector, items) if items else ([], {})
                for row_id, message in failures.items():
                    records[row_id].setdefault("failures", {}).setdefault(selector.name, message)
                for (row, subset), sel in zip(items, selections, strict=True):
                    cell = records[row.id]["results"].setdefault(selector.name, {}).setdefault(str(b), [])
                    cell.append({"answer": sel.answer, "status": sel.status, "samples": sel.samples,
                                 "correct": row.is_correct(sel.answer), "subset": list(subset),
                                 "any_correct": any(row.is_correct(row.candidates[i].answer) for i in subset)})
            seconds = time.perf_counter() - started
            work = verifier.stats.since(before) if verifier is not None else None
            spent = (work.calls, work.generated_tokens, work.requests, seconds) if work else (0, 0, 0, seconds)
            for r in chunk:  # the chunk's cost, shared evenly by its rows
                records[r.id]["cost"][selector.name] = {
                    k: v / len(chunk) for k, v in zip(("calls", "tokens", "requests", "seconds"), spent, strict=True)}
        for r in chunk:
            records[r.id]["unparsed_candidates"] = sum(c.answer is None for c in r.candidates)
        append_jsonl((records[r.id] for r in chunk), path)
        log(f"selected {min(start + chunk_size, len(todo))}/{len(todo)} rows")
    return path


def _mean(xs, empty=float("nan")):
    return sum(xs) / len(xs) if xs else empty


def paired_bootstrap(diffs: Sequence[float], resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of the mean of per-row paired differences."""
    if not diffs:
        return float("nan"), float("nan")
    rng, n = random.Random(seed), len(diffs)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return means[int(0.025 * resamples)], means[min(resamples - 1, int(0.975 * resamples))]


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (selector right / reference wrong, and reverse)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def pool_stats(rows: Sequence[PoolRow], think_range=(64, 1024), ngram: int = 3) -> dict:
    """Diagnostics of the candidates themselves (Elect paper Table 5 style): schema rate, mean cited fraction,
    EGS against the gold evidence where rows have it, TI (mean tau), RR (mean rho), mean tail confidence."""
    from ..data.synthetic import evidence_grounding_score
    from ..elect.parsing import repetition_ratio, think_length, transparency_score

    cands = [(r, c) for r in rows for c in r.candidates]
    if not cands:
        return {}
    egs = [evidence_grounding_score(c.parse.keyframes, c.parse.invalid, r.evidence) for r, c in cands if r.evidence]
    confs = [c.confidence for _, c in cands if c.confidence is not None]
    frac = [len(c.parse.keyframes) / r.num_frames for r, c in cands if r.num_frames]
    return {"candidates": len(cands), "schema_rate": _mean([float(c.parse.format_ok) for _, c in cands]),
            "answer_rate": _mean([float(c.answer is not None) for _, c in cands]),
            "cited_fraction": _mean(frac, None), "EGS": _mean(egs, None),
            "TI": _mean([transparency_score(think_length(c.parse.think), think_range) for _, c in cands]),
            "RR": _mean([repetition_ratio(c.parse.think, ngram) for _, c in cands]), "tail_conf": _mean(confs, None)}


def summarize(records: Sequence[dict], reference: str = "majority", resamples: int = 2000) -> dict:
    """Per selector and budget: accuracy and its paired CI against `reference`, reversal, harm, fallback, samples,
    costs, plus the counts of bad input."""
    summary: dict = {"rows": len(records),
                     "unparsed_candidates": sum(r.get("unparsed_candidates", 0) for r in records),
                     "candidates": sum(r.get("n", 0) for r in records), "selectors": {}}
    for name in dict.fromkeys(s for r in records for s in r["results"]):
        per_budget = {}
        budgets = sorted({int(b) for r in records for b in r["results"].get(name, {})})
        for b in budgets:
            acc, diffs, rev, harm, fallback, samples, errors, short = [], [], [], [], [], [], 0, 0
            flips, discordant, single = 0, [0, 0], True
            won, won_ref = [], []  # cells with a winner (not a fallback): the winner vs gold, the reference vs gold
            for r in records:
                cells = r["results"].get(name, {}).get(str(b))
                refs = r["results"].get(reference, {}).get(str(b))
                if not cells:
                    short += 1
                    continue
                if cells[0]["correct"] is None:
                    continue
                row_acc = _mean([float(c["correct"]) for c in cells])
                acc.append(row_acc)
                samples.append(_mean([c["samples"] for c in cells]))
                fallback.append(_mean([float(c["status"] not in ("selected", "referee_flip")) for c in cells]))
                errors += sum(c["status"] == "error" for c in cells)
                flips += sum(c["status"] == "referee_flip" for c in cells)
                single = single and len(cells) == 1
                if refs and len(refs) == len(cells):
                    diffs.append(row_acc - _mean([float(c["correct"]) for c in refs]))
                    for c, m in zip(cells, refs, strict=True):
                        discordant[0] += bool(c["correct"]) and not m["correct"]
                        discordant[1] += not c["correct"] and bool(m["correct"])
                        if c["status"] in ("selected", "referee_flip"):
                            won.append(float(c["correct"]))
                            won_ref.append(float(m["correct"]))
                        if m["correct"]:
                            harm.append(float(not c["correct"]))
                        elif c.get("any_correct"):
                            rev.append(float(c["correct"]))
            lo, hi = paired_bootstrap(diffs, resamples) if name != reference else (0.0, 0.0)
            per_budget[str(b)] = {
                "rows": len(acc), "accuracy": _mean(acc), "delta_vs_" + reference: _mean(diffs, None),
                "ci95": [lo, hi], "reversal_rate": _mean(rev, None), "reversal_rows": len(rev),
                "harm_rate": _mean(harm, None), "fallback_rate": _mean(fallback), "errors": errors,
                "rows_short": short, "mean_samples": _mean(samples), "referee_flips": flips,
                # group-level agreement: how often the selector's own winner (no fallback) is the gold answer, with
                # its 95% bootstrap interval, and the reference's accuracy on the same cells
                "winner_cells": len(won), "winner_accuracy": _mean(won, None),
                "winner_ci95": list(paired_bootstrap(won, resamples)) if won else None,
                "reference_on_winner_cells": _mean(won_ref, None),
                # exact McNemar against the reference, when each row has one subset (b = n): paired 0/1 outcomes
                "mcnemar_p": mcnemar_exact(*discordant) if single and diffs and name != reference else None,
            }
        failed = [r["failures"][name] for r in records if name in r.get("failures", {})]
        if failed:
            summary.setdefault("selector_failures", {})[name] = {"rows": len(failed), "first": failed[0]}
        costs = [r["cost"][name] for r in records if name in r.get("cost", {})]
        summary["selectors"][name] = {"budgets": per_budget, "cost_per_row": {
            k: _mean([c[k] for c in costs]) for k in ("calls", "requests", "tokens", "seconds")} if costs else {}}
    return summary


def format_table(summary: dict, reference: str = "majority") -> str:
    """A markdown table: one line per selector and budget."""
    lines = [(f"| selector | b | acc | Δ vs {reference} [95% CI] | McNemar p | reversal | harm | fallback | K | "
              "calls/row | tokens/row | s/row |"), "|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def pct(x):
        return "–" if x is None or math.isnan(x) else f"{100 * x:.1f}"

    for name, s in summary["selectors"].items():
        cost = s["cost_per_row"]
        for b, m in s["budgets"].items():
            delta = m.get("delta_vs_" + reference)
            ci = "–" if delta is None or name == reference else (
                f"{100 * delta:+.1f} [{100 * m['ci95'][0]:+.1f}, {100 * m['ci95'][1]:+.1f}]")
            lines.append(
                f"| {name} | {b} | {pct(m['accuracy'])} | {ci} | "
                f"{'–' if m.get('mcnemar_p') is None else format(m['mcnemar_p'], '.3f')} | "
                f"{pct(m['reversal_rate'])} | {pct(m['harm_rate'])} | "
                f"{pct(m['fallback_rate'])} | {m['mean_samples']:.2f} | {cost.get('calls', 0):.2f} | "
                f"{cost.get('tokens', 0):.1f} | {cost.get('seconds', 0):.3f} |")
    won = [(name, b, m) for name, s in summary["selectors"].items() if name != reference
           for b, m in s["budgets"].items() if m.get("winner_cells")]
    if won:
        lines += ["", f"| selector | b | cells with a winner | winner = gold [95% CI] | {reference} on those cells |",
                  "|---|---|---|---|---|"]
        for name, b, m in won:
            lo, hi = m["winner_ci95"]
            lines.append(f"| {name} | {b} | {m['winner_cells']} | {pct(m['winner_accuracy'])} "
                         f"[{pct(lo)}, {pct(hi)}] | {pct(m['reference_on_winner_cells'])} |")
    return "\n".join(lines)
