"""`rlce-trl analyze`: flags, input checks and the run of the reward-analysis bench (format and analyses:
[`rlce_trl.analysis.bench`]). A missing, malformed or empty log, a record without the fields the bench needs and
out-of-range flags end in one line that names the fix ([`~rlce_trl.errors.InputError`]), before anything is written.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ..data.jsonl import read_jsonl_counted, write_jsonl
from ..errors import InputError
from ..evidence.pipeline import EvidenceSettings
from .groups_log import log_groups
from .plots import plot_bench, plot_simulation
from .simulation import SyntheticVerifier, exact_single_test_accuracy, simulate_composition, synthetic_groups
from .tables import markdown_table, simulation_table, summarize, write_tables


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


def check_args(args: argparse.Namespace) -> None:
    """Every flag problem at once, as one [`InputError`]."""
    problems = []
    for name in ("max_tests", "permutations", "trials", "num_answers", "tests_per_direction"):
        if getattr(args, name) < 1:
            problems.append(f"--{name.replace('_', '-')} {getattr(args, name)}: use 1 or more")
    if args.simulate and args.num_answers < 2:
        problems.append("--num-answers: the simulation compares at least 2 answers")
    if args.synthetic is not None and args.synthetic < 1:
        problems.append(f"--synthetic {args.synthetic}: give the number of synthetic groups, 1 or more")
    bad = [e for e in args.error_rates if not 0 <= e <= 1]
    if bad:
        problems.append(f"--error-rates {bad[0]}: error rates are fractions in [0, 1]")
    if not 0 <= args.abstain_rate < 1:
        problems.append(f"--abstain-rate {args.abstain_rate}: use a fraction in [0, 1)")
    if args.concentration is not None and args.concentration <= 0:
        problems.append(f"--concentration {args.concentration}: use a positive number")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        problems.append(f"--out {args.out!r} is a file: pass a folder")
    if problems:
        raise InputError("; ".join(problems) + ".")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _entry_problem(name: str, entry, n: int) -> str | None:
    """Why one method's entry of a record cannot be analysed (`None` when it can)."""
    rewards = entry.get("rewards") if isinstance(entry, dict) else None
    if not isinstance(rewards, list) or len(rewards) != n or not all(r is None or _number(r) for r in rewards):
        return f"method {name!r} has no `rewards` list of numbers (or null) as long as `correct`"
    for cost in ("calls", "requests", "tokens", "prompt_chars"):
        if entry.get(cost) is not None and not _number(entry[cost]):
            return f"method {name!r} has a non-numeric `{cost}`"
    answer_correct, tests = entry.get("answer_correct"), entry.get("tests")
    if answer_correct is not None and (not isinstance(answer_correct, list)
                                       or not all(isinstance(c, bool) for c in answer_correct)):
        return f"method {name!r} has `answer_correct` that is not a list of booleans"
    if tests is not None:
        if not isinstance(tests, list):
            return f"method {name!r} has `tests` that is not a list"
        k = len(answer_correct or [])
        for test in tests:
            ok = (isinstance(test, dict) and isinstance(test.get("favoured"), int)
                  and 0 <= test["favoured"] < max(k, 1)
                  and (test.get("against") is None or isinstance(test["against"], int) and 0 <= test["against"] < k)
                  and test.get("verdict") in ("yes", "no", "unknown", None))
            if not ok:
                return (f"method {name!r} has a test {str(test)[:80]} without `favoured` / `against` indexing its "
                        "`answer_correct` or with a verdict other than yes / no / unknown / null")
    return None


def read_log(path: str | os.PathLike, methods: Sequence[str] | None = None) -> list[dict]:
    """The records of a logged-groups file, checked: an empty log, a record without the fields the bench needs, or
    `--methods` naming a method the log lacks raise [`InputError`] naming the record and the fix."""
    records, skipped = read_jsonl_counted(path, "logged-groups file")
    if skipped:
        print(f"warning: {path}: skipped an unreadable last line (cut short?)", file=sys.stderr)
    if not records:
        raise InputError(f"logged-groups file {str(path)!r} holds no records: log some groups first (see "
                         "`rlce_trl.analysis.bench` for the format) or use --synthetic N.")
    fix = "each record needs `correct` (a list of booleans) and `methods` ({name: {\"rewards\": [...]}})"
    for k, record in enumerate(records):
        correct, by_method = record.get("correct"), record.get("methods")
        problem = None
        if not isinstance(correct, list) or not all(isinstance(c, bool) for c in correct):
            problem = "`correct` is missing or not a list of booleans"
        elif not isinstance(by_method, dict) or not by_method:
            problem = "`methods` is missing or empty"
        else:
            for name, entry in by_method.items():
                problem = _entry_problem(name, entry, len(correct))
                if problem:
                    break
        if problem:
            raise InputError(f"logged-groups file {str(path)!r} record {k + 1}: {problem}. Fix: {fix}.")
    if methods:
        present = {name for record in records for name in record["methods"]}
        unknown = [m for m in methods if m not in present]
        if unknown:
            raise InputError(f"--methods {unknown[0]!r} is not in the log (it has {', '.join(sorted(present))}).")
    return records


def main(argv: Sequence[str] | None = None) -> int:
    """`rlce-trl analyze`. Bad flags and bad logs raise [`InputError`] (one line, printed by `rlce-trl`); run as
    `python -m rlce_trl.analysis.cli` the same line is printed here."""
    try:
        return _main(argv)
    except InputError as error:
        if __name__ != "__main__":
            raise
        print(f"error: {error}", file=sys.stderr)
        return 2


def _main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_args(args)
    if args.log is not None and args.synthetic is None and not args.simulate:
        records = read_log(args.log, args.methods)  # before anything is written
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"cannot create --out {args.out!r} ({error.strerror}): pass a writable folder.") from None
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
    if args.synthetic or args.simulate:
        records = read_log(log, args.methods)
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
