"""`rlce-trl calibrate score | fit | run | export`: measure, calibrate and revise the frozen verifier's prompts.

    rlce-trl calibrate score --verifier_model_name_or_path smollm2-135m-instruct [--prompts p.json] [--split held-out]
    rlce-trl calibrate fit   --verifier_model_name_or_path M --output_file calibration.json   (calibration half)
    rlce-trl calibrate run   --verifier_model_name_or_path M --cases labelled.jsonl --retained old.jsonl \
        --output_file p2.json
    rlce-trl calibrate export --groups logged.jsonl --k 50 --output_file queries.jsonl

Without `--cases`, the built-in claim set (`calibration/cases.py`) is used. Flags, files and the verifier's path are
checked before the verifier loads.
"""

from __future__ import annotations

import argparse
import os

from ..data.jsonl import read_jsonl, write_json, write_jsonl
from ..errors import InputError, output_file_error, print_error, raise_problems
from ..models import check_model_source, resolve_model
from ._args import positive_int


def _check(args) -> None:
    """Flags and paths, before the verifier loads: every problem at once, as one [`InputError`]."""
    problems = [output_file_error(args.output_file, args.default_name)]  # required by every step but `score`
    files = [(f, getattr(args, f, None)) for f in ("prompts", "cases", "calibration", "retained", "groups")]
    files += [("variants", path) for path in getattr(args, "variants", None) or []]
    problems += [f"--{flag} {path!r}: no such file" for flag, path in files if path is not None
                 and not os.path.isfile(path)]
    raise_problems(problems)
    if hasattr(args, "verifier_model_name_or_path"):
        check_model_source(resolve_model(args.verifier_model_name_or_path), "--verifier_model_name_or_path")


def _verifier(args):
    from ..verifiers.transformers_backend import TransformersVerifier, load_frozen_model

    model, tokenizer = load_frozen_model(resolve_model(args.verifier_model_name_or_path), dtype="float32")
    return TransformersVerifier(model, tokenizer, batch_size=args.batch_size)


def _prompts(args):
    from ..evidence.prompt_set import VerifierPrompts, load_prompts

    return load_prompts(args.prompts) if args.prompts else VerifierPrompts()


def _cases(path, split):
    from ..calibration.cases import load_cases, preference_claims, split_cases

    return split_cases(load_cases(path) if path else preference_claims(), split)


def _score(args) -> int:
    from ..calibration.agreement import score_prompts
    from ..verifiers.calibrated import VerdictCalibration

    prompts, cases = _prompts(args), _cases(args.cases, args.split)
    calibration = VerdictCalibration.load(args.calibration) if args.calibration else None
    if not cases:
        raise InputError(f"no cases in split {args.split!r}: pass --split all, or --cases with more rows.")
    a = score_prompts(_verifier(args), prompts, cases, calibration, args.resamples, args.seed)
    print(f"prompt version: {a.version}   cases: {a.n}   true yes-rate: {a.true_yes_rate:.3f}")
    print(f"  accuracy  {a.accuracy}")
    print(f"  kappa     {a.kappa}")
    print(f"  yes-rate  {a.yes_rate}")
    print(f"  verdicts  {dict(sorted(a.verdicts.items()))}   unreadable: {a.unreadable}")
    if args.output_file:
        write_json(a.to_dict(), args.output_file)
    return 0


def _fit(args) -> int:
    from ..calibration.agreement import fit_calibration

    if args.no_prior and args.no_band:
        raise InputError("--no_prior and --no_band leave nothing to fit: drop one of them.")
    prompts, cases = _prompts(args), _cases(args.cases, "calibration")
    if not cases:
        raise InputError("no cases in the calibration half: pass --cases with more labelled rows.")
    calibration = fit_calibration(_verifier(args), prompts, cases, contextual=not args.no_prior, band=not args.no_band)
    calibration.save(args.output_file)
    print(f"prior {calibration.prior}  band {calibration.band:.4f}  "
          f"fitted on {calibration.fitted_on} cases -> {args.output_file}")
    return 0


def _run(args) -> int:
    from ..calibration.calibrator import CoactiveCalibrator, few_shot_proposer, list_proposer
    from ..calibration.cases import load_cases
    from ..evidence.prompt_set import load_prompts

    prompts, current = _prompts(args), _cases(args.cases, "all" if args.cases else "calibration")
    retained = load_cases(args.retained) if args.retained else []
    proposers = []
    if args.variants:
        proposers.append(list_proposer([load_prompts(p) for p in args.variants]))
    proposers.append(few_shot_proposer(current, max_examples=args.max_examples))
    calibrator = CoactiveCalibrator(_verifier(args), proposers, max_versions=args.max_versions,
                                    patience=args.patience, max_regression=args.max_regression, metric=args.metric)
    best, history = calibrator.run(prompts, current, retained)
    for step in history:
        print(step.line())
    best = best.revised(calibrated_on=len(current) + len(retained))  # the cumulative set J_t
    best.save(args.output_file)
    print(f"best version {best.version} -> {args.output_file}")
    return 0


def _export(args) -> int:
    from ..calibration.queries import select_queries

    try:
        groups = read_jsonl(args.groups)
    except (OSError, ValueError) as error:
        raise InputError(f"cannot read logged groups {args.groups}: {error}") from None
    queries, skipped = select_queries(groups, k=args.k)
    if not queries and skipped:
        raise InputError(f"all {skipped} groups of {args.groups} are malformed (each needs `methods.rlce` with "
                         "`answers` and `assignment`, or those fields at the top as in a run's "
                         "rlce_evidence.jsonl): pass a bench log (format: rlce_trl.analysis.groups_log) or a "
                         "training run's evidence trail.")
    if not groups:
        raise InputError(f"{args.groups} holds no logged groups: nothing to export; pass a bench log or a training "
                         "run's rlce_evidence.jsonl.")
    if not queries:
        raise InputError(f"none of the {len(groups)} groups of {args.groups} is uncertain, inconsistent or high "
                         "impact: nothing to export (no file written); log more groups or pass another run's.")
    n = write_jsonl(queries, args.output_file)
    note = f", skipped {skipped} malformed groups" if skipped else ""
    print(f"{n} queries -> {args.output_file} ({len(groups)} groups read{note})")
    return 0


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "calibrate",
        help="Measure and calibrate the frozen verifier on labelled claims (label-light; VeriFine-style loop).",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="calibrate_command", metavar="<step>", required=True)
    score = _step(sub, "score", "Validator accuracy, Cohen's kappa and yes-rate with bootstrap CIs.")
    score.add_argument("--split", default="held-out", help="calibration, held-out or all (default held-out).")
    score.add_argument("--calibration", default=None, help="A verdict calibration from `calibrate fit`.")
    score.add_argument("--resamples", type=positive_int, default=1000, help="Bootstrap resamples.")
    score.add_argument("--seed", type=int, default=0, help="Seed of the bootstrap.")
    score.add_argument("--output_file", default=None, help="Also write the figures as JSON here.")
    score.set_defaults(func=main, step=_score, default_name="score.json")
    fit = _step(sub, "fit", "Fit calibrated verdicts (content-free prior + unknown band) on the calibration half.")
    fit.add_argument("--no_prior", action="store_true", help="No contextual calibration, the band only.")
    fit.add_argument("--no_band", action="store_true", help="No unknown band, the prior only.")
    fit.add_argument("--output_file", required=True, help="Where to write the calibration (JSON).")
    fit.set_defaults(func=main, step=_fit, default_name="calibration.json")
    run = _step(sub, "run", "Coactive calibration: propose prompt revisions, keep those that agree better.")
    run.add_argument("--retained", default=None, help="Cases kept from earlier rounds (JSONL).")
    run.add_argument("--variants", nargs="*", default=[], help="Prompt files to try as revisions, in order.")
    run.add_argument("--max_examples", type=positive_int, default=4, help="Few-shot examples at most.")
    run.add_argument("--max_versions", type=positive_int, default=20, help="Prompt versions to try at most.")
    run.add_argument("--patience", type=positive_int, default=10,
                     help="Stop after this many versions in a row without improvement.")
    run.add_argument("--max_regression", type=float, default=0.02,
                     help="Largest drop on the retained cases a kept version may cause.")
    run.add_argument("--metric", default="kappa", choices=["accuracy", "kappa"], help="What a revision must improve.")
    run.add_argument("--output_file", required=True, help="Where to write the best prompts (JSON).")
    run.set_defaults(func=main, step=_run, default_name="prompts.json")
    export = _step(sub, "export", "Select calibration queries from logged groups (uncertain, inconsistent, high "
                   "impact).", model=False)
    export.add_argument("--groups", required=True, help="Logged groups (JSONL), e.g. a run's rlce_groups.jsonl.")
    export.add_argument("--k", type=positive_int, default=50, help="Queries to select at most.")
    export.add_argument("--output_file", required=True, help="Where to write the queries (JSONL).")
    export.set_defaults(func=main, step=_export, default_name="queries.jsonl")


def _step(sub, name: str, text: str, model: bool = True):
    """A step's parser; the steps that run the verifier (`model`) take its flags, prompts and cases."""
    parser = sub.add_parser(name, help=text, description=text)
    if model:
        parser.add_argument("--verifier_model_name_or_path", default="smollm2-135m-instruct",
                            help="Frozen verifier: a folder, a Hub id, or smollm2-135m-instruct (offline).")
        parser.add_argument("--batch_size", type=positive_int, default=16, help="Verifier micro-batch size.")
        parser.add_argument("--prompts", default=None, help="Prompts file (JSON/YAML); default: the built-in prompts.")
        parser.add_argument("--cases", default=None, help="Labelled cases (JSONL); default: the built-in claim set.")
    return parser


def main(args) -> int:
    try:
        _check(args)
        return args.step(args)
    except ValueError as error:
        print_error(error)
        return 2
