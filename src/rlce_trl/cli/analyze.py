"""`rlce-trl analyze`: the reward-analysis bench over logged rollout groups (format, producer and checked reader:
[`rlce_trl.analysis.groups_log`]), and its two subcommands `analyze ttt` (test-time training runs side by side) and
`analyze coevolve` (co-evolution runs with their compute). A missing, malformed or empty log, a record without the
fields the bench needs and out-of-range flags end in one line that names the fix ([`~rlce_trl.errors.InputError`]),
before anything is written.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import InputError, output_dir_error, output_file_error, raise_problems
from ._args import CLIParser, bounded_int, positive_int

USAGE = """rlce-trl analyze LOG --output_dir DIR [options]      (the bench over a logged-groups JSONL)
       rlce-trl analyze --simulate | --synthetic N --output_dir DIR [options]     (no LOG)
       rlce-trl analyze ttt RUN [RUN ...]
       rlce-trl analyze coevolve RUN [RUN ...] [--rlce RUN --rlce_gpus N] [--output_file FILE]"""

#: The most synthetic groups `--synthetic` writes (each is scored by every method: about 2 s per 1000 groups).
MAX_SYNTHETIC = 100_000
#: The most synthetic examples per error rate of `--simulate`.
MAX_TRIALS = 1_000_000


class _WithCommands(CLIParser):
    """A parser whose first argument may name one of its `commands` (a subcommand parsed by that command's parser);
    any other first argument is its own: `analyze LOG --output_dir DIR` and `analyze ttt RUN ...` both parse."""

    commands: dict[str, argparse.ArgumentParser] = {}

    def parse_known_args(self, args=None, namespace=None):
        if args and args[0] in self.commands:
            return self.commands[args[0]].parse_known_args(args[1:], namespace)
        return super().parse_known_args(args, namespace)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "analyze",
        help="Reward-analysis bench over logged rollout groups with gold labels (or --simulate / --synthetic N); "
        "`analyze ttt`, `analyze coevolve`: runs side by side.",
        description="Reward-analysis bench over logged rollout groups with gold labels (evaluation only), or the\n"
        "synthetic-validator simulation.",
        usage=USAGE,
        epilog="subcommands:\n  ttt         test-time training runs side by side (rlce-trl analyze ttt --help)\n"
        "  coevolve    co-evolution runs with their compute and the ratio to RLCE (rlce-trl analyze coevolve --help)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.__class__ = _WithCommands
    parser.commands = {"ttt": _ttt_parser(), "coevolve": _coevolve_parser()}
    parser.set_defaults(func=main, parser=parser)
    parser.add_argument("log", nargs="?", help="logged-groups JSONL (format: rlce_trl.analysis.groups_log docstring)")
    parser.add_argument("--output_dir", required=True, help="output folder for tables and PNGs")
    parser.add_argument("--methods", nargs="+", help="methods to report (default: all in the log)")
    parser.add_argument("--max_tests", type=positive_int, default=12, help="largest number of composed tests")
    parser.add_argument("--permutations", type=positive_int, default=20, help="random test orders per group")
    parser.add_argument("--ties", choices=("random", "wrong"), default="random",
                        help="credit of a tied verdict: expected credit of a uniform tie-break, or 0")
    parser.add_argument("--seed", type=int, default=0, help="seed of the test orders and the synthetic data")
    parser.add_argument("--no_plots", action="store_true", help="tables only (no matplotlib needed)")
    sim = parser.add_argument_group("simulation")
    sim.add_argument("--simulate", action="store_true", help="run the synthetic-validator simulation")
    sim.add_argument("--error_rates", type=float, nargs="+", default=[0.2, 0.3, 0.4],
                     help="validator error rates to simulate (fractions in [0, 1]); --synthetic uses the first")
    sim.add_argument("--trials", type=bounded_int(1, MAX_TRIALS), default=2000,
                     help=f"synthetic examples per error rate (at most {MAX_TRIALS:_})")
    sim.add_argument("--num_answers", type=positive_int, default=2, help="distinct answers per simulated group")
    sim.add_argument("--rlce_tests_per_direction", dest="tests_per_direction", type=positive_int, default=6,
                     help="tests per direction of each pairwise comparison (as in RLCEGRPOConfig)")
    sim.add_argument("--abstain_rate", type=float, default=0.0, help="fraction of verdicts that abstain, in [0, 1)")
    sim.add_argument("--concentration", type=float, default=None,
                     help="per-example error rate ~ Beta(k e, k (1 - e)); default: the same e for every example")
    syn = parser.add_argument_group("synthetic log")
    syn.add_argument("--synthetic", type=bounded_int(1, MAX_SYNTHETIC), metavar="N",
                     help="first write <output_dir>/synthetic_groups.jsonl: N synthetic groups (at most "
                     f"{MAX_SYNTHETIC:_}) scored by every method with a synthetic verifier (error rate: the first of "
                     "--error_rates), then analyze it")


def _ttt_parser() -> argparse.ArgumentParser:
    parser = CLIParser(
        prog="rlce-trl analyze ttt",
        description="Test-time training runs side by side (the shape of the paper's Table 2): the per-pass "
        "evaluation scores that PassEvaluationCallback writes to <output_dir>/tta/passes.json, one row per run.",
    )
    parser.add_argument("runs", nargs="+", help="output folders of test-time adaptation runs (or their passes.json)")
    parser.set_defaults(func=main_ttt, parser=parser)
    return parser


def _coevolve_parser() -> argparse.ArgumentParser:
    parser = CLIParser(
        prog="rlce-trl analyze coevolve",
        description="Co-evolution runs side by side, with their compute: the `state.json` that `rlce-trl coevolve` "
        "writes (validation per round, best round, wall / CPU / device hours per phase), and optionally RLCE runs "
        "for the paper's cost ratio (\"co-evolution costs 3-6 times RLCE's GPU-hours\", App. D.4-D.6).",
    )
    parser.add_argument("runs", nargs="+", help="output folders of `rlce-trl coevolve` runs")
    parser.add_argument("--rlce", default=None, help="an RLCE run's output_dir, for the device-hours ratio")
    parser.add_argument("--rlce_gpus", type=positive_int, default=None, help="GPUs the RLCE run used")
    parser.add_argument("--output_file", default=None, help="also write the tables to this Markdown file")
    parser.set_defaults(func=main_coevolve, parser=parser)
    return parser


def main_ttt(args: argparse.Namespace) -> int:
    from ..analysis.ttt import load_run, table

    try:
        runs = [load_run(p) for p in args.runs]
    except (FileNotFoundError, ValueError) as error:
        raise InputError(str(error)) from None
    print(table(runs))
    return 0


def main_coevolve(args: argparse.Namespace) -> int:
    from ..coevolution.summary import load_coevolve, per_phase, rlce_device_hours, table

    if args.rlce and not args.rlce_gpus:
        raise InputError("--rlce needs --rlce_gpus N (the GPUs that run used) to turn its runtime into GPU-hours.")
    raise_problems([output_file_error(args.output_file, "coevolve.md")])
    runs = [load_coevolve(p) for p in args.runs]
    rlce_hours = rlce_device_hours(args.rlce, args.rlce_gpus) if args.rlce else None
    text = "\n\n".join([table(runs, rlce_hours), *(per_phase(r) for r in runs)])
    if rlce_hours is not None:
        text += f"\n\nRLCE reference: {rlce_hours:.2f} device-hours ({args.rlce})."
    print(text)
    if args.output_file:
        Path(args.output_file).write_text(text + "\n", encoding="utf-8")
    return 0


def check_args(args: argparse.Namespace) -> None:
    """Every flag problem at once, as one [`InputError`]."""
    problems = []
    source = [flag for flag, given in (("LOG", args.log is not None), ("--simulate", args.simulate),
                                       ("--synthetic", args.synthetic is not None)) if given]
    if len(source) > 1:
        problems.append(f"{' and '.join(source)} each choose what to analyze: give one (a logged-groups JSONL, "
                        "--simulate or --synthetic N)")
    if not source:
        problems.append("give a logged-groups JSONL, --synthetic N or --simulate")
    if args.simulate and args.num_answers < 2:
        problems.append("--num_answers: the simulation compares at least 2 answers")
    bad = [e for e in args.error_rates if not 0 <= e <= 1]
    if bad:
        problems.append(f"--error_rates {bad[0]}: error rates are fractions in [0, 1]")
    if not 0 <= args.abstain_rate < 1:
        problems.append(f"--abstain_rate {args.abstain_rate}: use a fraction in [0, 1)")
    if args.concentration is not None and args.concentration <= 0:
        problems.append(f"--concentration {args.concentration}: use a positive number")
    raise_problems([*problems, output_dir_error(args.output_dir)])


def main(args: argparse.Namespace) -> int:
    from ..analysis.groups_log import log_groups, read_log
    from ..analysis.plots import plot_bench, plot_simulation
    from ..analysis.simulation import (
        SyntheticVerifier,
        exact_single_test_accuracy,
        simulate_composition,
        synthetic_groups,
    )
    from ..analysis.tables import markdown_table, simulation_table, summarize, write_tables
    from ..data.jsonl import write_jsonl
    from ..evidence.pipeline import EvidenceSettings

    check_args(args)
    if args.log is not None:
        records = read_log(args.log, args.methods)  # before anything is written
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)  # writable: checked by check_args
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
    if args.synthetic:
        print(f"scoring {args.synthetic} synthetic groups with every method ...", flush=True)
        ids, golds, groups = map(list, zip(*synthetic_groups(args.synthetic, seed=args.seed), strict=True))
        verifier = SyntheticVerifier(dict(zip(ids, golds, strict=True)), error_rate=args.error_rates[0],
                                     concentration=args.concentration, seed=args.seed)
        records = log_groups(groups, golds, verifier, prompt_ids=ids,
                             settings=EvidenceSettings(tests_per_direction=args.tests_per_direction))
        log = out / "synthetic_groups.jsonl"
        write_jsonl(records, log)
        print(f"wrote {log}")
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
