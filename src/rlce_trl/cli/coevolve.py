"""`rlce-trl coevolve`: run a co-evolution baseline (RLAC; VisPlay and Video-Zero when their modules are there).

    rlce-trl coevolve --method rlac --config prefeval_rlac --train_file train.jsonl \
        --validation_file validation.jsonl --output_dir runs/rlac [--resume] [--<recipe key> <value> ...]

Any further `--key value` overrides the recipe in every phase (e.g. `--max_completion_length 64`). Bad flags, files
or recipes end in one line (`InputError`); a failing phase ends in one line naming the phase and its log.
"""

from __future__ import annotations

import argparse
import os
import shlex

from ..errors import InputError, MissingInputError, output_dir_error, print_error, raise_problems
from ..models import resolve_model
from ..training.recipes import list_recipes, load_recipe
from ._args import CLIParser

REQUIRED = ("method", "config", "output_dir")
USAGE = ("rlce-trl coevolve --method {rlac,visplay,video_zero} --config <recipe> --train_file <jsonl> "
         "[--validation_file <jsonl>] --output_dir <dir> [--resume] [--<recipe key> <value> ...]")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "coevolve", usage=USAGE, description=__doc__.split("\n\n")[0],
        help="Co-evolution baselines (RLAC; VisPlay, Video-Zero): phases round after round, resumable.",
    )
    parser.__class__ = _Raising  # a flag error is one line with the usage (an InputError), not argparse's exit
    parser.add_argument("--method", help="rlac, visplay or video_zero.")
    parser.add_argument("--config", help="Recipe: a YAML path or a name from `rlce-trl recipes`.")
    parser.add_argument("--train_file", default=None, help="The corpus (JSONL); default: the recipe's train_file.")
    parser.add_argument("--validation_file", default=None, help="Validation rows with gold (JSONL).")
    parser.add_argument("--media_root", default=None, help="Folder the HBA clip paths are relative to.")
    parser.add_argument("--output_dir", help="The run's folder (state.json, logs, checkpoints).")
    parser.add_argument("--resume", action="store_true", help="Continue the run in --output_dir from state.json.")
    parser.set_defaults(func=main, accepts_extra=True, parser=parser)


def _check_file(flag: str, path: str | None, required: bool) -> str | None:
    if path is None:
        if required:
            raise InputError(f"{flag} is required: pass the file (or set it in the recipe).")
        return None
    if not os.path.isfile(path):
        raise MissingInputError(f"{flag} {path!r} does not exist or is not a file: pass an existing JSONL file.")
    return path


class _Raising(CLIParser):
    def error(self, message):
        raise InputError(f"{message}. Usage: {USAGE}")


def main(args: argparse.Namespace) -> int:
    """`rlce-trl coevolve`: `--method`, `--config` and `--output_dir` are required (checked here, so that a bare
    `rlce-trl coevolve` prints the help); further `--key value` pairs (`args.extra`) override the recipe."""
    if not args.extra and all(getattr(args, flag) is None for flag in REQUIRED):
        args.parser.print_help()
        return 2
    missing = [f"--{flag}" for flag in REQUIRED if getattr(args, flag) is None]
    if missing:
        raise InputError(f"the following arguments are required: {', '.join(missing)}. Usage: {USAGE}")
    if any(a.startswith("-") and not a.startswith("--") for a in args.extra[:1]):
        raise InputError(f"unknown flag {args.extra[0]!r}. Usage: {USAGE}")
    from ..coevolution.driver import Coevolver, DriverSettings, PhaseFailedError
    from ..coevolution.registry import METHODS, get_method

    if args.method not in METHODS:
        raise InputError(f"--method {args.method!r}: use one of {', '.join(METHODS)}.")

    raise_problems([output_dir_error(args.output_dir)])
    recipe = load_recipe(args.config)
    _check_coevolution_recipe(recipe)
    overrides = list(args.extra)
    for flag in ("train_file", "validation_file", "media_root"):
        if getattr(args, flag):
            overrides += [f"--{flag}", getattr(args, flag)]
    script_args, training_args, model_args = _parse_recipe(recipe.path, overrides, args.output_dir)
    if script_args.coevolve_method and script_args.coevolve_method != args.method:
        raise InputError(f"--method {args.method} but the recipe {recipe.name} is written for "
                         f"{script_args.coevolve_method}: pass --method {script_args.coevolve_method} or another "
                         "recipe.")
    if training_args.partner_mode == "server":
        raise InputError("partner_mode: server serves one fixed model, but the co-evolution partner is the other "
                         "role's checkpoint of each round: set partner_mode: transformers (the driver passes each "
                         "round's checkpoint to the phase).")
    method = get_method(args.method, script_args.settings())
    train_file = _check_file("--train_file", script_args.train_file, required=True)
    validation_file = _check_file("--validation_file", script_args.validation_file, required=False)
    if validation_file:
        _check_validation(validation_file, script_args)
    settings = DriverSettings(
        recipe=str(recipe.path), train_file=train_file, validation_file=validation_file, output_dir=args.output_dir,
        base_model=resolve_model(model_args.model_name_or_path), rounds=script_args.coevolve_rounds,
        settings=script_args.settings(), extra_args=overrides,
        launcher=shlex.split(script_args.coevolve_launcher) if script_args.coevolve_launcher else None,
        seed=training_args.seed,
    )
    try:
        state = Coevolver(method, settings, log=print).run(resume=args.resume)
    except PhaseFailedError as error:
        print_error(error)
        return 1
    print(f"state: {os.path.join(args.output_dir, 'state.json')}; summary: "
          f"{os.path.join(args.output_dir, 'summary.json')} ({len(state['steps'])} steps)")
    return 0


def _check_coevolution_recipe(recipe) -> None:
    """A co-evolution recipe sets `coevolve_method`; a training recipe (`script: ...`) is for `rlce-trl train`."""
    if recipe.kind == "coevolve":
        return
    shipped = ", ".join(p.stem for p in list_recipes() if p.stem.endswith(("_rlac", "_visplay", "_video_zero")))
    what = (f"a training recipe (`script: {recipe.values['script']}`): run it with `rlce-trl train --config "
            f"{recipe.path.stem}`" if "script" in recipe.values else "not a co-evolution recipe")
    raise InputError(f"--config {recipe.name} is {what}. A co-evolution recipe sets `coevolve_method`: pass one of "
                     f"{shipped}, or add `coevolve_method: <method>` to your own.")


def _parse_recipe(recipe, overrides: list[str], output_dir: str):
    """The recipe with the overrides, parsed by the phase parser (the training scripts' recipe parser): a bad key or
    value is one line here, before any phase starts."""
    from ..coevolution.phase import make_parser, without_backend

    return make_parser().parse_args_and_config(["--config", str(recipe), "--output_dir", output_dir,
                                                *without_backend(overrides)])


def _check_validation(path: str, script_args) -> None:
    """Validation rows must load, and free-text rows need the recipe's judge: checked before any phase runs."""
    from ..coevolution.corpus import load_validation

    try:
        rows = load_validation(path, script_args.hba_task)
    except (ValueError, OSError) as error:
        raise InputError(f"--validation_file: {error}") from None
    if not any(r.get("answer_options") for r in rows) and not (script_args.judge_base_url and script_args.judge_model):
        raise InputError("The validation rows are free text: validation needs an LLM judge; set judge_base_url and "
                         "judge_model in the recipe (any OpenAI-compatible endpoint), or drop --validation_file.")
