"""`rlce-trl check --config <recipe> [--task FILE] [overrides]`: the preflight. Builds the run exactly as `rlce-trl
train` would (same arguments), samples one group for a few rows with the recipe's generation settings, scores them
once with the run's verifier, prints what it saw and whether training would have a learning signal
([`rlce_trl.training.preflight`]). Exit 0: signal; 1: no signal (the last lines name what to change); 2: bad input.
"""

from __future__ import annotations

import argparse

from ..errors import InputError, print_error
from ._args import positive_int

USAGE = "rlce-trl check --config <recipe> [--task FILE] [--model_name_or_path M] [--<argument> <value> ...]"
DESCRIPTION = (
    "Preflight in about a minute: the exact training prompt of a few rows, one sampled group each with the recipe's "
    "generation settings, the verifier run once on them; prints the answer rate, distinct answers per group, the "
    "share of groups whose RLCE rewards would differ, the verifier's verdict balance, the step's time and the disk "
    "one checkpoint takes. Takes every argument `rlce-trl train` takes. Exit 1 when training would have no learning "
    "signal, naming what to change."
)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("check", help="Preflight: would this run learn? (one sampled step, ~1 minute)",
                                   usage=USAGE, description=DESCRIPTION)
    parser.add_argument("--config", default=None, help="The recipe: a YAML path or a name from `rlce-trl recipes`.")
    parser.add_argument("--check_rows", type=positive_int, default=4,
                        help="Training rows to sample one group for (default 4).")
    parser.set_defaults(func=main, accepts_extra=True)


def main(args: argparse.Namespace) -> int:
    import importlib
    import tempfile

    from ..training.preflight import sample_step, stop_before_training
    from ..training.recipes import load_recipe

    if args.config is None:
        raise InputError("rlce-trl check needs --config <recipe> (the one you will train with): a YAML path or a "
                         "name from `rlce-trl recipes`.")
    recipe = load_recipe(args.config)
    script = importlib.import_module(recipe.module())
    parsed = script.make_parser().parse_args_and_config(["--config", str(recipe.path), *args.extra])
    training_args = next(a for a in parsed if hasattr(a, "output_dir") and hasattr(a, "num_generations"))
    script_args = next((a for a in parsed if hasattr(a, "prompt_suffix")), None)
    print(f"rlce-trl check: recipe {recipe.path.stem}"
          + (f", task {script_args.task}" if script_args is not None and script_args.task else "")
          + f"; sampling {training_args.num_generations} rollouts for each of {args.check_rows} rows ...", flush=True)
    with tempfile.TemporaryDirectory(prefix="rlce-check-") as scratch:  # the run's folder stays untouched
        training_args.output_dir = scratch
        training_args.report_to = []
        training_args.push_to_hub = False
        with stop_before_training(lambda trainer: sample_step(trainer, args.check_rows)):
            result = script.main(*parsed)
    show(result, training_args)
    return 0 if result.verdict.has_signal else 1


def show(result, training_args) -> None:
    """The preflight's report on stdout; without signal, the fix lines last (also on stderr)."""
    from ..training.disk import human

    verdict = result.verdict
    print("\nPrompt of row 1, exactly as the policy sees it in training:")
    print("  " + result.prompts[0].replace("\n", "\n  "))
    print("\nRow 1's completions:")
    for text in result.completions[0][:4]:
        shown = " ".join(text.split())
        print(f"  - {shown[:160]}{' ...' if len(shown) > 160 else ''}")
    rollouts = sum(len(g) for g in result.answers)
    answered = sum(a is not None for g in result.answers for a in g)
    print(f"\nrows sampled:             {len(result.prompts)} x {result.num_generations} rollouts "
          f"(max_completion_length {result.max_completion_length})")
    print(f"answer rate:              {answered}/{rollouts} rollouts hold an answer"
          + (f"; {result.clipped_share:.0%} cut at max_completion_length" if result.clipped_share is not None else ""))
    print(f"distinct answers/group:   {', '.join(map(str, result.distinct_answers))}")
    share = verdict.spread_share
    print(f"rewards differ in:        {'n/a' if share is None else f'{share:.0%}'} of groups")
    total = sum(result.verdicts.values())
    mix = ", ".join(f"{k} {v}" for k, v in sorted(result.verdicts.items())) or "none (no verifier call in this step)"
    print(f"verifier verdicts:        {mix}" + (f" ({total} in all)" if total else ""))
    verifier = f"; the verifier {result.verifier_seconds:.1f} s of it" if result.verifier_seconds is not None else ""
    step_rollouts = training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps
    print(f"step time:                {result.seconds:.1f} s to generate and score these groups{verifier} (a "
          f"training step of {step_rollouts} rollouts adds its backward pass)")
    print(f"one checkpoint on disk:   {human(result.checkpoint_bytes)}"
          + (" (weights only: save_only_model)" if training_args.save_only_model else " (weights and optimizer "
             "state; save_only_model: true keeps the weights only)")
          + "; the final model is written once more")
    print()
    print(verdict.line)
    if not verdict.has_signal:
        for hint in result.hints:
            print(f"change: {hint}")
        print_error(verdict.line)
