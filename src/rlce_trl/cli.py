"""The `rlce-trl` command line: `rlce-trl <subcommand> [--flags]`.

To add a subcommand, write `_add_<name>(subparsers)` that creates the parser and sets `func` (a function of the parsed
arguments returning an exit code), and append it to `SUBCOMMANDS`. Heavy imports go inside `func`, so that
`rlce-trl --help` stays fast.

Bad input ends in one line: a subcommand raises [`~rlce_trl.errors.InputError`] (or the verifier's
`VerifierUnavailableError`) with a message that names the fix, and [`main`] prints `error: <message>` (scrubbed of
credentials) and returns 2. Any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys


def _prepare_prefeval(args: argparse.Namespace) -> int:
    from .data.prefeval import DEFAULT_SEED, prepare_prefeval

    seed = args.seed if args.seed is not None else DEFAULT_SEED
    counts = prepare_prefeval(args.prefeval_dir, args.output_dir, seed=seed)
    splits = list(next(iter(counts.values())))
    print(f"{'form':<10}" + "".join(f"{split:>12}" for split in splits))
    for form, by_split in counts.items():
        print(f"{form:<10}" + "".join(f"{by_split[split]:>12}" for split in splits))
    print(f"wrote {args.output_dir}/<form>/<split>.jsonl")
    return 0


def _add_prepare_prefeval(subparsers) -> None:
    parser = subparsers.add_parser(
        "prepare-prefeval",
        help="Build the PrefEval explicit / choice / persona splits (GRPO-ready JSONL) from a local checkout.",
        description="Build the PrefEval splits of the paper (appendix A) from a local checkout of "
        "https://github.com/amazon-science/PrefEval and write OUTPUT_DIR/<form>/<split>.jsonl.",
    )
    parser.add_argument("--prefeval_dir", default=None, help="PrefEval checkout (default: $PREFEVAL_DIR).")
    parser.add_argument("--output_dir", required=True, help="Where to write the splits.")
    parser.add_argument("--seed", type=int, default=None, help="Seed of the padding draw and the split (default 42).")
    parser.set_defaults(func=_prepare_prefeval)


def _add_evaluate(subparsers) -> None:
    from .evaluation.evaluate_cli import add_evaluate_arguments, main_evaluate

    parser = subparsers.add_parser(
        "evaluate",
        help="Greedy generation of a checkpoint on a split, answer extraction and scoring (appendix A protocol).",
        description="Evaluate a checkpoint on a split with the paper's protocol. Writes per-row JSONL and a summary "
        "JSON as it goes; rerunning the same command resumes.",
    )
    add_evaluate_arguments(parser)
    parser.set_defaults(func=main_evaluate)


def _analyze(args: argparse.Namespace) -> int:
    if args.bench_args[:1] == ["ttt"]:  # test-time training runs side by side
        from .analysis.ttt import main as ttt_main

        return ttt_main(args.bench_args[1:])
    if args.bench_args[:1] == ["coevolve"]:  # co-evolution runs: validation per round, hours, ratio to RLCE
        from .analysis.coevolve import main as coevolve_main

        return coevolve_main(args.bench_args[1:])
    from .analysis.cli import main as bench_main

    return bench_main(args.bench_args) or 0


def _add_analyze(subparsers) -> None:
    parser = subparsers.add_parser(
        "analyze",
        help="Reward-analysis bench over logged rollout groups with gold labels (or --simulate / --synthetic N).",
        description="Compare reward methods on logged groups: reward variation, reversals, verdict accuracy versus "
        "composed tests, verifier cost. Arguments are those of `python -m rlce_trl.analysis.cli --help`.",
        add_help=False,
    )
    parser.add_argument("bench_args", nargs=argparse.REMAINDER)
    parser.set_defaults(func=_analyze)


def _report(args: argparse.Namespace) -> int:
    from .report import main_report

    return main_report(args)


def _add_report(subparsers) -> None:
    parser = subparsers.add_parser(
        "report",
        help="Write a self-contained HTML page (curves, groups and their evidence, completions) and PNG plots.",
        description="Report on a training run: curves over steps from trainer_state.json, a browser of the rollout "
        "groups of rlce_evidence.jsonl with their tests and verdicts, and the completions tables. Writes "
        "RUN_DIR/report/index.html and PNG plots beside it; the page needs no network access.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="The output_dir of a training run.")
    parser.add_argument("--output_dir", default=None, help="Folder of the page and plots (default RUN_DIR/report).")
    parser.add_argument("--max_groups", type=int, default=5000, help="Newest groups embedded in the page.")
    parser.set_defaults(func=_report)


def _add_sample(subparsers) -> None:
    from .selection.commands import add_sample_arguments, main_sample

    parser = subparsers.add_parser("sample", help="Sample n candidates per row (text, answer, token log-probs) into a "
                                   "pool that every selector of `rlce-trl select` reads; resumable.")
    add_sample_arguments(parser)
    parser.set_defaults(func=main_sample)


def _add_select(subparsers) -> None:
    from .selection.commands import add_select_arguments, main_select

    parser = subparsers.add_parser("select", help="Run selectors (majority, rlce, elect, ...) over a sampled pool at "
                                   "several budgets; accuracy, paired CIs against majority, costs; resumable.")
    add_select_arguments(parser)
    parser.set_defaults(func=main_select)


def _add_calibrate(subparsers) -> None:
    from .calibration.cli import add_calibrate

    add_calibrate(subparsers)


def _train(argv: list[str]) -> int:
    from .scripts.recipes import train

    if argv[:1] in (["-h"], ["--help"]) or not argv:
        print("usage: rlce-trl train --config <recipe> [--<argument> <value> ...]\n\nRun a recipe (a YAML path or "
              "a name from `rlce-trl recipes`) with its training script; any recipe key can be overridden. Several "
              "GPUs: accelerate launch --config_file <accelerate.yaml> -m rlce_trl.cli train --config <recipe>.\n"
              "Arguments: python -m rlce_trl.scripts.train_prefeval --help (or train_hba).")
        return 0 if argv else 2
    try:
        return train(argv)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _add_train(subparsers) -> None:
    parser = subparsers.add_parser(
        "train", help="Train with a recipe: rlce-trl train --config <recipe or path> [overrides].", add_help=False
    )
    parser.add_argument("train_args", nargs=argparse.REMAINDER)
    parser.set_defaults(func=lambda args: _train(args.train_args))


def _recipes(args: argparse.Namespace) -> int:
    from .scripts.recipes import describe, list_recipes, resolve_recipe

    try:
        if args.name:
            path = resolve_recipe(args.name)
            print(path if args.path else path.read_text(encoding="utf-8"), end="\n" if args.path else "")
            return 0
        recipes = list_recipes()
    except FileNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    width = max(len(p.stem) for p in recipes)
    for path in recipes:
        print(f"{path.stem:<{width}}  {describe(path)}")
    print(f"\n{len(recipes)} recipes in {recipes[0].parent}. `rlce-trl recipes NAME` prints one; "
          "`rlce-trl train --config NAME` runs it.")
    return 0


def _coevolve(argv: list[str]) -> int:
    from .coevolution.commands import main as coevolve_main

    return coevolve_main(argv)


def _add_coevolve(subparsers) -> None:
    parser = subparsers.add_parser(
        "coevolve", add_help=False,
        help="Co-evolution baselines (RLAC; VisPlay, Video-Zero): phases round after round, resumable.",
    )
    parser.add_argument("coevolve_args", nargs=argparse.REMAINDER)
    parser.set_defaults(func=lambda args: _coevolve(args.coevolve_args))


def _add_compare(subparsers) -> None:
    from .comparison import add_arguments, main

    parser = subparsers.add_parser("compare", help="The paper's comparison for one task: train every (method, seed), "
                                   "test each best-on-validation checkpoint, write Table 1's shape; resumable.")
    add_arguments(parser)
    parser.set_defaults(func=main)


def _add_recipes(subparsers) -> None:
    parser = subparsers.add_parser("recipes", help="List the shipped training recipes, or print one.")
    parser.add_argument("name", nargs="?", help="Recipe to print (e.g. prefeval_rlce).")
    parser.add_argument("--path", action="store_true", help="Print the recipe's file path instead of its content.")
    parser.set_defaults(func=_recipes)




SUBCOMMANDS = [
    _add_prepare_prefeval, _add_evaluate, _add_analyze, _add_report, _add_sample, _add_select, _add_calibrate,
    _add_train, _add_recipes, _add_coevolve, _add_compare,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlce-trl", description="RLCE rewards for TRL's GRPOTrainer.")
    subparsers = parser.add_subparsers(dest="command", metavar="<command>")
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["analyze"]:  # its own parser, help included
            return _analyze(argparse.Namespace(bench_args=argv[1:]))
        if argv[:1] == ["train"]:  # the training script's own parser takes the rest
            return _train(argv[1:])
        if argv[:1] == ["coevolve"]:  # its own parser (recipe overrides pass through)
            return _coevolve(argv[1:])
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return 1
        return args.func(args)
    except _user_errors() as error:  # bad input: one line that names the fix, no traceback
        from .credentials import scrub_message

        print(f"error: {scrub_message(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: rerun the same command to resume where it stopped", file=sys.stderr)
        return 130


def _user_errors() -> tuple[type[BaseException], ...]:
    """The project's own error types for bad input and unreachable services (not a blanket `Exception`)."""
    from .errors import InputError
    from .verifiers.base import VerifierUnavailableError

    return (InputError, VerifierUnavailableError)


if __name__ == "__main__":
    sys.exit(main())
