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

[`main`] (`rlce-trl analyze`) writes `summary.md`, `summary.csv`, `composition.csv`, `incorrect_tests.csv` and PNG
plots; with `--simulate` it runs the synthetic-validator simulation ([`rlce_trl.analysis.simulation`]) instead, and
with `--synthetic N` it first writes a logged-groups file from N synthetic groups scored by the real scorers with a
synthetic verifier.

The bench is split by job; this module documents the format and gathers the public names:

- [`rlce_trl.analysis.groups_log`]: `log_groups`, `CountingVerifier`, `default_correct` (producing a log);
- [`rlce_trl.analysis.tables`]: `summarize`, `markdown_table`, `write_tables`, `simulation_table`;
- [`rlce_trl.analysis.plots`]: `plot_bench`, `plot_simulation`;
- [`rlce_trl.analysis.cli`]: `build_parser`, `main`, `read_log` (flags and input checks).

Logs are read and written with the package's one JSONL reader and writer (`rlce_trl.data.jsonl`).
"""

from __future__ import annotations

from ..data.jsonl import read_jsonl, write_jsonl
from .cli import build_parser, main, read_log
from .groups_log import DEFAULT_METHODS, CountingVerifier, default_correct, log_groups
from .plots import plot_bench, plot_simulation
from .tables import REFERENCES, markdown_table, simulation_table, summarize, write_tables

__all__ = [
    "DEFAULT_METHODS", "REFERENCES", "CountingVerifier", "build_parser", "default_correct", "log_groups", "main",
    "markdown_table", "plot_bench", "plot_simulation", "read_jsonl", "read_log", "simulation_table", "summarize",
    "write_jsonl", "write_tables",
]

if __name__ == "__main__":
    import sys

    from ..cli import main as rlce_main

    raise SystemExit(rlce_main(["analyze", *sys.argv[1:]]))
