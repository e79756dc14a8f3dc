"""`rlce-trl calibrate score | fit | run | export`: measure, calibrate and revise the frozen verifier's prompts.

    rlce-trl calibrate score --verifier_model_name_or_path smollm2-135m-instruct [--prompts p.json] [--split held-out]
    rlce-trl calibrate fit   --verifier_model_name_or_path M --out calibration.json      (on the calibration half)
    rlce-trl calibrate run   --verifier_model_name_or_path M --cases labelled.jsonl --retained old.jsonl --out p2.json
    rlce-trl calibrate export --groups logged.jsonl --k 50 --out queries.jsonl

Without `--cases`, the built-in claim set (`calibration/cases.py`) is used.
"""

from __future__ import annotations

import argparse
import json
import sys


def _verifier(args):
    from ..models import resolve_model
    from ..verifiers.transformers_backend import TransformersVerifier, load_frozen_model

    model, tokenizer = load_frozen_model(resolve_model(args.verifier_model_name_or_path), dtype="float32")
    return TransformersVerifier(model, tokenizer, batch_size=args.batch_size)


def _prompts(args):
    from ..evidence.prompt_set import VerifierPrompts, load_prompts

    return load_prompts(args.prompts) if args.prompts else VerifierPrompts()


def _cases(path, split):
    from ..calibration.cases import load_cases, preference_claims, split_cases

    return split_cases(load_cases(path) if path else preference_claims(), split)


def _print_alignment(a) -> None:
    print(f"prompt version: {a.version}   cases: {a.n}   true yes-rate: {a.true_yes_rate:.3f}")
    print(f"  accuracy  {a.accuracy}")
    print(f"  kappa     {a.kappa}")
    print(f"  yes-rate  {a.yes_rate}")
    print(f"  verdicts  {dict(sorted(a.verdicts.items()))}   unreadable: {a.unreadable}")


def _score(args) -> int:
    from ..calibration.scoring import score_prompts
    from ..verifiers.calibrated import VerdictCalibration

    prompts, cases = _prompts(args), _cases(args.cases, args.split)
    calibration = VerdictCalibration.load(args.calibration) if args.calibration else None
    if not cases:
        print(f"error: no cases in split {args.split!r}.", file=sys.stderr)
        return 2
    result = score_prompts(_verifier(args), prompts, cases, calibration, args.resamples, args.seed)
    _print_alignment(result)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(result.to_dict(), f, indent=2)
    return 0


def _fit(args) -> int:
    from ..calibration.scoring import fit_calibration

    prompts, cases = _prompts(args), _cases(args.cases, "calibration")
    calibration = fit_calibration(_verifier(args), prompts, cases, contextual=not args.no_prior, band=not args.no_band)
    calibration.save(args.out)
    print(f"prior {calibration.prior}  band {calibration.band:.4f}  "
          f"fitted on {calibration.fitted_on} cases -> {args.out}")
    return 0


def _run(args) -> int:
    from ..calibration.calibrator import CoactiveCalibrator, few_shot_proposer, list_proposer
    from ..calibration.cases import load_cases

    prompts, current = _prompts(args), _cases(args.cases, "all" if args.cases else "calibration")
    retained = load_cases(args.retained) if args.retained else []
    proposers = []
    if args.variants:
        from ..evidence.prompt_set import load_prompts

        proposers.append(list_proposer([load_prompts(p) for p in args.variants]))
    proposers.append(few_shot_proposer(current, max_examples=args.max_examples))
    calibrator = CoactiveCalibrator(
        _verifier(args),
        proposers,
        max_versions=args.max_versions,
        patience=args.patience,
        max_regression=args.max_regression,
        metric=args.metric,
    )
    best, history = calibrator.run(prompts, current, retained)
    for step in history:
        print(step.line())
    best = best.revised(calibrated_on=len(current) + len(retained))  # the cumulative set J_t
    best.save(args.out)
    print(f"best version {best.version} -> {args.out}")
    return 0


def _export(args) -> int:
    from ..calibration.queries import select_queries
    from ..data.jsonl import read_jsonl, write_jsonl

    try:
        groups = read_jsonl(args.groups)
    except (OSError, ValueError) as error:
        print(f"error: cannot read logged groups {args.groups}: {error}", file=sys.stderr)
        return 2
    queries, skipped = select_queries(groups, k=args.k)
    n = write_jsonl(queries, args.out)
    print(f"{n} queries -> {args.out} (skipped {skipped} malformed groups)")
    return 0


def _common(parser, model: bool = True) -> None:
    if model:
        parser.add_argument(
            "--verifier_model_name_or_path",
            default="smollm2-135m-instruct",
            help="Frozen verifier: a folder, a Hub id, or smollm2-135m-instruct (offline).",
        )
        parser.add_argument("--batch_size", type=int, default=16, help="Verifier micro-batch size.")
        parser.add_argument("--prompts", default=None, help="Prompts file (JSON/YAML); default: the built-in prompts.")
        parser.add_argument("--cases", default=None, help="Labelled cases (JSONL); default: the built-in claim set.")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "calibrate",
        help="Measure and calibrate the frozen verifier on labelled claims (label-light; VeriFine-style loop).",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="calibrate_command", metavar="<step>", required=True)
    score = sub.add_parser("score", help="Validator accuracy, Cohen's kappa and yes-rate with bootstrap CIs.")
    _common(score)
    score.add_argument("--split", default="held-out", help="calibration, held-out or all (default held-out).")
    score.add_argument("--calibration", default=None, help="A verdict calibration from `calibrate fit`.")
    score.add_argument("--resamples", type=int, default=1000, help="Bootstrap resamples.")
    score.add_argument("--seed", type=int, default=0)
    score.add_argument("--out", default=None, help="Also write the figures as JSON here.")
    score.set_defaults(func=main, step=_score)
    fit = sub.add_parser(
        "fit", help="Fit calibrated verdicts (content-free prior + unknown band) on the calibration half."
    )
    _common(fit)
    fit.add_argument("--no_prior", action="store_true", help="No contextual calibration, the band only.")
    fit.add_argument("--no_band", action="store_true", help="No unknown band, the prior only.")
    fit.add_argument("--out", required=True, help="Where to write the calibration (JSON).")
    fit.set_defaults(func=main, step=_fit)
    run = sub.add_parser("run", help="Coactive calibration: propose prompt revisions, keep those that agree better.")
    _common(run)
    run.add_argument("--retained", default=None, help="Cases kept from earlier rounds (JSONL).")
    run.add_argument("--variants", nargs="*", default=[], help="Prompt files to try as revisions, in order.")
    run.add_argument("--max_examples", type=int, default=4, help="Few-shot examples at most.")
    run.add_argument("--max_versions", type=int, default=20)
    run.add_argument("--patience", type=int, default=10)
    run.add_argument("--max_regression", type=float, default=0.02)
    run.add_argument("--metric", default="kappa", choices=["accuracy", "kappa"])
    run.add_argument("--out", required=True, help="Where to write the best prompts (JSON).")
    run.set_defaults(func=main, step=_run)
    export = sub.add_parser(
        "export", help="Select calibration queries from logged groups (uncertain, inconsistent, high impact)."
    )
    export.add_argument("--groups", required=True, help="Logged groups (JSONL).")
    export.add_argument("--k", type=int, default=50)
    export.add_argument("--out", required=True)
    export.set_defaults(func=main, step=_export)


def main(args) -> int:
    try:
        return args.step(args)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
