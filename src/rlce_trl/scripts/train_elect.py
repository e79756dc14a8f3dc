# Copyright the rlce-trl developers. Licensed under the Apache License, Version 2.0.
"""
Elect rewards recipe on the offline numbered-evidence task (Elect paper §4.1 / §5.1 hyper-parameters where they fit
a CPU): GRPO with the five Elect rewards, either paper-faithful with gold answers on a stock `trl.GRPOTrainer`
(`--gate gold`), or label-free on `RLCEGRPOTrainer`, where "correct" is RLCE's verified answer (`--gate rlce`).

    python -m rlce_trl.scripts.train_elect --gate gold --output_dir runs/elect_gold        # SmolLM2-135M, CPU
    python -m rlce_trl.scripts.train_elect --gate rlce --output_dir runs/elect_rlce --max_steps 20
    rlce-trl train --config elect_numbered_evidence --output_dir runs/elect_gold           # the shipped recipe

`--config recipe.yaml` reads the flags from a YAML mapping (flags on the command line win), as for the other training
scripts; a run is the one training pipeline (`rlce_trl.training.pipeline.train`) on the numbered-evidence rows.

Paper settings (GPU): `--num_generations 4 --beta 0.04 --learning_rate 1e-5 --lora` (r=8, alpha=16, dropout 0.05),
weight decay 0.1, grad clip 1.0, 2 epochs, `--think_range 64,1024`. The default think range here is (16, 128)
tokens, because a 135M model on 8-sentence rows thinks briefly (below the lower bound the transparency term is 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlce_trl.errors import InputError
from rlce_trl.scripts import exit_on_bad_input
from rlce_trl.training.arguments import RecipeParser, RLCEScriptArguments
from rlce_trl.training.pipeline import TaskRows, train


@dataclass
class ElectScriptArguments:
    """The Elect script's settings (recipe keys and flags; `--help` lists them)."""

    script: str = field(default="elect", metadata={
        "help": "The recipe's training script, read by `rlce-trl train` (this script: elect).", "choices": ["elect"]})
    model_name_or_path: str = field(default="smollm2", metadata={"help": "`smollm2` = the packaged SmolLM2-135M."})
    gate: str = field(default="gold", metadata={
        "help": "gold (stock GRPOTrainer, gold answers), rlce (RLCE's verified answer) or none.",
        "choices": ["gold", "rlce", "none"]})
    output_dir: str | None = field(default=None, metadata={"help": "Required (on the command line or in the recipe)."})
    rows: int = field(default=64, metadata={"help": "Numbered-evidence rows to train on."})
    max_steps: int = field(default=10, metadata={"help": "Optimizer steps."})
    num_generations: int = field(default=4, metadata={"help": "Completions per prompt (G)."})
    per_device_train_batch_size: int = field(default=4, metadata={"help": "Completions per device and step."})
    max_completion_length: int = field(default=160, metadata={"help": "Tokens per completion at most."})
    learning_rate: float = field(default=1e-5, metadata={"help": "Learning rate."})
    beta: float = field(default=0.0, metadata={"help": "KL coefficient (0: no reference model)."})
    think_range: str = field(default="16,128", metadata={"help": "Lower,upper thinking tokens of the transparency "
                                                         "term."})
    lora: bool = field(default=False, metadata={"help": "LoRA r=8, alpha=16, dropout 0.05 (paper §5.1)."})
    seed: int = field(default=0, metadata={"help": "Seed of the rows and the run."})
    max_prompt_length: int | None = field(default=None, metadata={
        "help": "Drop rows whose templated prompt is longer (tokens); None: keep all (the shared length filter)."})
    recipe: str | None = field(default=None, init=False, repr=False)  # set by the parser, as for the other scripts

    def __post_init__(self):
        """A bad think_range is one line naming the fix. output_dir is checked when the script runs
        (`_with_output_dir`), so that a recipe without one still parses (`rlce-trl recipes`)."""
        try:
            lo, hi = (int(x) for x in self.think_range.split(","))
        except ValueError:
            raise InputError(f"think_range {self.think_range!r}: give two whole numbers, e.g. 16,128.") from None
        if not 0 <= lo < hi:
            raise InputError(f"think_range {self.think_range!r}: give lower,upper with 0 <= lower < upper.")


def make_parser() -> RecipeParser:
    return RecipeParser((ElectScriptArguments,))


def parse_args(argv=None) -> ElectScriptArguments:
    """The settings, with a `--config` recipe's values as defaults (flags win); a missing `--output_dir` is one
    line naming the fix."""
    return _with_output_dir(make_parser().parse_args_and_config(argv)[0])


def _with_output_dir(args: ElectScriptArguments) -> ElectScriptArguments:
    if not args.output_dir:
        raise InputError("pass --output_dir (or set output_dir in the recipe).")
    return args


def main(args: ElectScriptArguments | list[str] | None = None):
    """Train; `args` are the parsed settings, or a command line to parse. The run is the shared pipeline
    ([`rlce_trl.training.pipeline.train`]) with the numbered-evidence task supplying its rows ([`elect_run`])."""
    args = _with_output_dir(args) if isinstance(args, ElectScriptArguments) else parse_args(args)
    *positional, reward_funcs, trainer_class = elect_run(args)
    return train(*positional, reward_funcs=reward_funcs, trainer_class=trainer_class)


def elect_run(args: ElectScriptArguments):
    """What [`train`](rlce_trl.training.pipeline.train) gets for an Elect run: the script, training and model args,
    the numbered-evidence rows (with `solution` for `--gate gold`), the Elect reward functions (weights in the
    training arguments) and the trainer class (a stock one unless `--gate rlce`, see the module)."""
    from transformers import AutoTokenizer
    from trl import ModelConfig

    from rlce_trl.data.synthetic import TASK, numbered_evidence
    from rlce_trl.data.tasks import get_task
    from rlce_trl.elect import ElectRewardConfig, make_elect_reward_funcs
    from rlce_trl.models import resolve_model

    model = resolve_model(args.model_name_or_path)
    rows = numbered_evidence(args.rows, seed=args.seed, split="train", supervised=args.gate == "gold")
    task = TaskRows(train=rows, validation=[], description=get_task(TASK).display_name, free_text=False)
    cfg = ElectRewardConfig(tokenizer=AutoTokenizer.from_pretrained(model), gate=args.gate,
                            think_range=tuple(int(x) for x in args.think_range.split(",")))
    common = {
        "output_dir": args.output_dir, "num_generations": args.num_generations,
        "per_device_train_batch_size": args.per_device_train_batch_size, "max_steps": args.max_steps,
        "max_completion_length": args.max_completion_length, "learning_rate": args.learning_rate,
        "beta": args.beta, "epsilon": 0.2, "weight_decay": 0.1, "max_grad_norm": 1.0, "logging_steps": 1,
        "report_to": "none", "bf16": False, "use_cpu": True, "gradient_checkpointing": False, "save_strategy": "no",
        "seed": args.seed,
    }
    if args.gate == "rlce":
        from rlce_trl.config import RLCEGRPOConfig
        from rlce_trl.trainer import RLCEGRPOTrainer

        funcs, weights = make_elect_reward_funcs(cfg, include_accuracy=False)
        training_args = RLCEGRPOConfig(**common, reward_weights=weights, rlce_verified_weight=0.1,
                                       rlce_format_weight=0.0)
        trainer_class = RLCEGRPOTrainer
    else:
        from trl import GRPOConfig, GRPOTrainer

        funcs, weights = make_elect_reward_funcs(cfg)
        training_args, trainer_class = GRPOConfig(**common, reward_weights=weights), GRPOTrainer
    model_args = ModelConfig(model_name_or_path=model, use_peft=args.lora, lora_r=8, lora_alpha=16,
                             lora_dropout=0.05, lora_task_type="CAUSAL_LM")
    script_args = RLCEScriptArguments(script="elect", max_prompt_length=args.max_prompt_length)
    script_args.recipe = args.recipe
    return script_args, training_args, model_args, task, funcs, trainer_class


def main_cli(argv=None) -> None:
    """The script's `__main__`: bad flags or recipe are one `error:` line and exit status 2."""
    exit_on_bad_input(lambda: main(argv))


if __name__ == "__main__":
    main_cli()
