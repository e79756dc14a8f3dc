"""The training scripts' command line: TRL's parser over (script arguments, [`RLCEGRPOConfig`], `trl.ModelConfig`)
with one-line errors ([`RecipeParser`]) and the script arguments the scripts share ([`RLCEScriptArguments`]). The
pipeline the scripts then run is [`rlce_trl.training.pipeline.train`]; their shared `__main__` is
`rlce_trl.scripts.run_script`.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass, field

from trl import ScriptArguments, TrlParser

from ..errors import InputError, did_you_mean, run_setting_problems
from .recipes import load_recipe


class RecipeParser(TrlParser):
    """TRL's `TrlParser` whose errors are one line that names the fix ([`InputError`]) instead of the whole usage:
    a wrong-typed value (on the command line or in the recipe), an unknown recipe key or flag with a "did you mean",
    a recipe that is not UTF-8 or not YAML, naming the file. `--help` still prints every argument."""

    _recipe: str | None = None

    def error(self, message):
        # argparse's own errors about a command-line value name the flag ("argument --max_steps: ..."), not the recipe
        where = f"{os.path.basename(self._recipe)}: " if self._recipe and not message.startswith("argument -") else ""
        raise InputError(f"{where}{message} (`--help` lists the arguments).")

    def parse_args_and_config(self, args=None):
        """TRL's `TrlParser.parse_args_and_config`, with the recipe read by [`load_recipe`] (a path or a shipped
        recipe's name) and every problem one [`InputError`]: an unknown key or flag, a wrong-typed value, a setting
        the configs' own checks refuse. The script arguments' `recipe` is the recipe as named (no directories)."""
        args = list(args) if args is not None else sys.argv[1:]
        known = {a.dest for a in self._actions} | {"env"}
        named = None
        if "--config" in args:
            at = args.index("--config")
            if at + 1 >= len(args):
                self.error("--config needs a recipe: a YAML path or a name from `rlce-trl recipes`")
            recipe = load_recipe(args[at + 1])
            self._recipe, named = str(recipe.path), os.path.basename(args[at + 1])
            del args[at:at + 2]
            config = dict(recipe.values)
            for key in config:
                if key not in known:
                    hint = did_you_mean(key, known)
                    raise InputError(f"unknown key {key!r} in {self._recipe}{hint or ': see `--help` for the keys.'}")
            self._check_types(config)
            env = config.pop("env", None) or {}
            if not isinstance(env, dict):
                self.error("env: give a mapping of environment variable names to values")
            os.environ.update({str(k): str(v) for k, v in env.items()})
            self.set_defaults_with_config(**config)
        self._check_flags(args)
        args = self._join_negative_values(args)
        given = {self._option_string_actions[w.split("=", 1)[0]].dest for w in args
                 if w.startswith("--") and w.split("=", 1)[0] in self._option_string_actions}
        # settings that would fail or do nothing only after both models load, checked on the plain values first, so
        # the message names the flag or the recipe key (the config checks too)
        values = self.parse_args(args)
        problems = hasattr(values, "learning_rate") and hasattr(values, "max_steps") and run_setting_problems(values)
        if problems:
            key, problem = problems[0]
            where = f"--{key}" if key in given or not self._recipe else f"{os.path.basename(self._recipe)}: {key}"
            raise InputError(f"{where} {problem}")
        try:
            parsed = self.parse_args_into_dataclasses(args=args)
        except InputError:
            raise
        except ValueError as error:  # a setting the configs' own checks refuse (TRL's and RLCE's __post_init__)
            message = " ".join(str(error).split())
            flags = sorted(key for key in given if re.search(rf"\b{key}\b", message))
            where = (f"--{flags[0]}: " if flags else f"{os.path.basename(self._recipe)}: " if self._recipe else "")
            raise InputError(f"{where}{message}") from None
        parsed[0].recipe = named
        return parsed

    def _join_negative_values(self, args: list[str]) -> list[str]:
        """`--learning_rate -1e-6` as `--learning_rate=-1e-6`: argparse takes a word like `-1e-6` for a flag (only
        `-1` and `-.5` look like numbers to it) and would say "expected one argument"; the value then reaches the
        checks that name the fix."""
        out = []
        for word in args:
            action = self._option_string_actions.get(out[-1]) if out and out[-1].startswith("--") else None
            if action is not None and action.nargs is None and _NUMBER.fullmatch(word):
                out[-1] = f"{out[-1]}={word}"
            else:
                out.append(word)
        return out

    def _check_flags(self, args: list[str]) -> None:
        """An unknown flag on the command line is one line with a "did you mean"."""
        options = [o for a in self._actions for o in a.option_strings if o.startswith("--")]
        takes_value = False  # the word after an option that takes a value is that value ("--x '--a 1 --b'")
        for word in args:
            flag = word.split("=", 1)[0]
            if takes_value:
                takes_value = False
                continue
            if word.startswith("--") and flag not in self._option_string_actions:
                hint = did_you_mean(flag, options)
                raise InputError(f"unknown argument {flag!r}{hint or ': see `--help` for the arguments.'}")
            action = self._option_string_actions.get(flag) if word.startswith("--") else None
            takes_value = action is not None and "=" not in word and action.nargs != 0

    def _check_types(self, config: dict) -> None:
        """Every recipe value against its argument's type and choices, so that a wrong one is one line naming the
        key: argparse would check only string values (naming the flag), and YAML-typed ones (a list, a number, a
        mapping) would fail inside a dataclass."""
        actions = {a.dest: a for a in self._actions}
        for key, value in config.items():
            action = actions.get(key)
            if action is None or value is None or action.type is None:
                continue
            values = value if isinstance(value, list) and action.nargs in ("+", "*") else [value]
            for item in values:
                if isinstance(item, (dict, list)):  # mapping fields (e.g. model_init_kwargs) take them as they are
                    if action.type is not str or action.choices:
                        self.error(f"{key}: {item!r} is a {type(item).__name__}, not a single value")
                    continue
                try:
                    converted = action.type(str(item))
                except (TypeError, ValueError, argparse.ArgumentTypeError) as error:
                    self.error(f"{key}: {item!r} is not a valid {_type_name(action)} ({error})")
                if action.choices is not None and converted not in action.choices:
                    self.error(f"{key}: {item!r} is not one of {', '.join(map(str, action.choices))}")


_NUMBER = re.compile(r"-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def _type_name(action) -> str:
    name = getattr(action.type, "__name__", "value")
    return {"string_to_bool": "boolean", "parse": "value"}.get(name, name)


@dataclass
class RLCEScriptArguments(ScriptArguments):
    """Script arguments shared by the RLCE training scripts (TRL's `ScriptArguments` plus the fields below).

    Args:
        script (`str`, *optional*):
            The recipe's training script (`prefeval`, `hba` or `elect`): `rlce-trl train` reads it from the recipe to
            pick the script; the script itself ignores it.
        task (`str`, *optional*):
            A task file ([`rlce_trl.data.tasks`]): train on its rows instead of the recipe's dataset, with the
            recipe's method and settings.
        prompt_suffix (`str`, *optional*):
            Text appended to the last user turn of every prompt. The quickstart uses it to remind a 135M model of the
            `\\boxed{}` answer format; the paper's recipes leave it unset.
        max_prompt_length (`int`, *optional*):
            Drop training rows whose chat-templated prompt has more tokens (the paper: 4,096; 8,192 for PrefEval).
            `None` keeps every row.
        validation_steps (`int`, *optional*):
            Validate on the validation split every this many optimizer steps and keep the best checkpoint in
            `<output_dir>/best` (the paper: every second cycle). `None` disables validation.
        validation_patience (`int`, *optional*):
            Stop training after this many validations without improvement (Table 10: 6 for the rubric baselines).
            `None` never stops early.
        validation_limit (`int`, *optional*):
            Validate on the first N validation rows only. With `tta_split`, adapt and evaluate on the first N rows of
            that split (test-time adaptation uses one split for both).
        validation_max_new_tokens (`int`, *optional*, defaults to `512`):
            Greedy tokens per validation response (the paper's evaluation decoding).
        judge_base_url (`str`, *optional*):
            OpenAI-compatible endpoint of the LLM judge that scores free-text validation rows (PrefEval, IntentQA).
        judge_model (`str`, *optional*):
            Model name at the judge endpoint.
        judge_api_key_env (`str`, *optional*, defaults to `"OPENAI_API_KEY"`):
            Name of the environment variable that holds the judge's key (the key itself is never stored).
        tta_split (`str`, *optional*):
            Test-time adaptation: adapt on this split's rows with their gold removed (the paper: `test`), for
            `num_train_epochs` passes, and evaluate on the same split with its gold at the end of every pass
            (`rlce_trl.training.tta`). `None`: ordinary training on the train split.
        tta_eval_base (`bool`, *optional*, defaults to `True`):
            With `tta_split`, also evaluate the base model before the first pass (pass 0).
    """

    script: str | None = field(default=None, metadata={
        "help": "The recipe's training script (prefeval, hba or elect), read by `rlce-trl train`."})
    task: str | None = field(default=None, metadata={
        "help": "Your own task file (YAML: data, prompt, labels, gold, metric): train on its train split (validation "
                "on its validation split) with the recipe's method and settings."})
    prompt_suffix: str | None = field(default=None, metadata={
        "help": "Text appended to the last user turn of every prompt (e.g. a format reminder for a small model); None "
                "leaves the prompts as built."})
    max_prompt_length: int | None = field(default=None, metadata={
        "help": "Drop training rows whose templated prompt is longer (tokens); None: keep all."})
    validation_steps: int | None = field(default=None, metadata={
        "help": "Validate every N optimizer steps and keep the best checkpoint in <output_dir>/best."})
    validation_patience: int | None = field(
        default=None, metadata={"help": "Stop after N validations without improvement; None never stops early."})
    validation_limit: int | None = field(
        default=None, metadata={"help": "Validate on the first N rows only (tta_split: adapt and evaluate on them)."})
    validation_max_new_tokens: int = field(default=512, metadata={"help": "Greedy tokens per validation response."})
    judge_base_url: str | None = field(
        default=None, metadata={"help": "OpenAI-compatible judge endpoint (.../v1) for free-text validation."})
    judge_model: str | None = field(default=None, metadata={"help": "Model name at the judge endpoint."})
    judge_api_key_env: str = field(
        default="OPENAI_API_KEY", metadata={"help": "Environment variable holding the judge's API key."})
    tta_split: str | None = field(default=None, metadata={
        "help": "Test-time adaptation: adapt on this split (gold removed) and evaluate on it every pass."})
    tta_eval_base: bool = field(default=True, metadata={"help": "With tta_split, evaluate the base model first."})
    #: the `--config` recipe as named, without directories (paths can hold user names), set by [`RecipeParser`] (not
    #: an argument): the model card and the prompting record name it
    recipe: str | None = field(default=None, init=False, repr=False)
