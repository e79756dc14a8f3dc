"""RLCE best-of-n (comparative evidence as an inference selector) on synthetic groups, through the real selection
code and the real evidence pipeline, with `SyntheticVerifier` (known error rates) standing in for the model.

Checks (next-capabilities §3.5): majority@n matches its analytic value; the oracle bounds every selector; RLCE-BoN's
accuracy on rows where majority is wrong but a correct candidate exists (the reversal rate) rises with the tests per
direction, the inference analogue of the RLCE paper's Fig. 3 (54% -> 69% MOSEI, 56% -> 66% UR-FUNNY, 1 -> 12 tests)
and of its Fig. 2 reversal rates (51-56% against USC).

    python -m benchmarks.rlce_best_of_n                     # 2,000 rows, n=4, error 0.3, t = 1, 2, 3, 6
    python -m benchmarks.rlce_best_of_n --rows 500 --error-rate 0.2
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time

from rlce_trl.analysis.simulation import SyntheticVerifier, synthetic_groups
from rlce_trl.evidence.pipeline import EvidenceSettings
from rlce_trl.selection import make_selector, row_from_record, select_rows, summarize


def analytic_majority(n: int, accuracy: float, no_answer: float, grid: int = 4000) -> float:
    """E_p[P(majority of n is gold)] for two labels, p ~ Beta(4a, 4(1-a)) as in `synthetic_groups`, first-seen
    tie-break, no answer counted wrong; exact enumeration of the n outcomes, midpoint rule over p."""
    import math

    a, b = 4 * accuracy, 4 * (1 - accuracy)
    norm = math.gamma(a + b) / (math.gamma(a) * math.gamma(b))
    total = 0.0
    for k in range(grid):
        p = (k + 0.5) / grid
        probs = {"C": (1 - no_answer) * p, "W": (1 - no_answer) * (1 - p), "N": no_answer}
        win = 0.0
        for seq in itertools.product("CWN", repeat=n):
            c, w = seq.count("C"), seq.count("W")
            if c > w or (c == w and c > 0 and seq.index("C") < seq.index("W")):
                win += math.prod(probs[s] for s in seq)
        total += win * norm * p ** (a - 1) * (1 - p) ** (b - 1) / grid
    return total


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--accuracy", type=float, default=0.55, help="mean policy accuracy of synthetic_groups")
    parser.add_argument("--error-rate", type=float, default=0.3, help="SyntheticVerifier validation error")
    parser.add_argument("--tests", type=int, nargs="+", default=[1, 2, 3, 6])
    parser.add_argument("--baselines", action="store_true", help="also USC and Policy-Judge (same error model)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    groups = synthetic_groups(args.rows, group_size=args.n, accuracy=args.accuracy, seed=args.seed)
    golds = {pid: gold for pid, gold, _ in groups}
    rows = [row_from_record({"id": pid, "prompt": g.context, "answer_options": list(g.labels), "gold": gold,
                             "candidates": [{"text": t} for t in g.completions]}) for pid, gold, g in groups]
    selectors = [make_selector("majority"), make_selector("oracle")]
    verifiers = {}
    for t in args.tests:
        verifiers[t] = SyntheticVerifier(golds, error_rate=args.error_rate, seed=args.seed)
        sel = make_selector("rlce", verifiers[t], settings=EvidenceSettings(tests_per_direction=t))
        sel.name = f"rlce_t{t}"
        selectors.append(sel)
    if args.baselines:
        for name in ("usc", "policy_judge"):
            selectors.append(make_selector(name, SyntheticVerifier(golds, error_rate=args.error_rate, seed=args.seed)))
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = select_rows(rows, selectors, [args.n], tmp, subsets=1, chunk_size=500, log=lambda _: None)
        records = [json.loads(line) for line in path.read_text().splitlines()]
    summary = summarize(records)
    expected = analytic_majority(args.n, args.accuracy, 0.05)
    print(f"{args.rows} synthetic rows, n={args.n}, policy accuracy ~{args.accuracy}, validator error "
          f"{args.error_rate} ({time.perf_counter() - start:.0f} s)\n")
    print("| selector | accuracy | Δ vs majority [95% CI] | reversal (majority wrong, a correct candidate) | harm | "
          "fallback | verifier requests/row |\n|---|---|---|---|---|---|---|")
    for name, s in summary["selectors"].items():
        m = s["budgets"][str(args.n)]
        d = m["delta_vs_majority"]
        ci = "–" if name == "majority" else f"{100 * d:+.1f} [{100 * m['ci95'][0]:+.1f}, {100 * m['ci95'][1]:+.1f}]"
        rev = "–" if m["reversal_rate"] is None else f"{100 * m['reversal_rate']:.1f} (of {m['reversal_rows']})"
        harm = "–" if m["harm_rate"] is None else f"{100 * m['harm_rate']:.1f}"
        print(f"| {name} | {100 * m['accuracy']:.1f} | {ci} | {rev} | {harm} | {100 * m['fallback_rate']:.1f} | "
              f"{s['cost_per_row'].get('requests', 0):.1f} |")
    acc = {n: s["budgets"][str(args.n)]["accuracy"] for n, s in summary["selectors"].items()}
    rev = [summary["selectors"][f"rlce_t{t}"]["budgets"][str(args.n)]["reversal_rate"] for t in args.tests]
    checks = {
        f"majority@{args.n} {100 * acc['majority']:.1f} within 2 pts of analytic {100 * expected:.1f}":
            abs(acc["majority"] - expected) <= 0.02,
        "oracle >= every selector": all(acc["oracle"] >= v - 1e-12 for v in acc.values()),
        "reversal rate rises with tests per direction (first < last)": rev[0] < rev[-1],
    }
    print()
    for name, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
