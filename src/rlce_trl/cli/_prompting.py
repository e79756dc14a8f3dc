"""How `evaluate`, `sample` and `select` prompt a trained policy: as its training did. The prompting
([`~rlce_trl.data.prompts.Prompting`]: the recipe's `prompt_suffix`, the reward method's system prompt, TRL's
`chat_template_kwargs`) comes from `--config <recipe>`, else from what the model's folder records (`rlce-trl train`
writes `rlce_prompting.json` into its output folder), else none (the rows as they are, a task file's own answer
instruction included). The prompts themselves are [`~rlce_trl.training.pipeline.policy_rows`], the training pipeline's
one function."""

from __future__ import annotations

import argparse
import sys

from ..data.prompts import Prompting, find_prompting
from ..training.recipes import load_recipe


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=None,
                        help="The recipe the model was trained with: prompt exactly as training did (its "
                        "prompt_suffix, the reward method's system prompt, chat_template_kwargs). Default: what the "
                        "model's folder records (rlce_prompting.json, written by `rlce-trl train`), else the rows as "
                        "they are.")


def resolve_prompting(config: str | None, model_path: str | None):
    """`(prompting, source)`: from `--config`, else the model folder's record, else the default (`source` None)."""
    if config:
        from ..training.pipeline import prompting_from_recipe

        recipe = load_recipe(config)
        return prompting_from_recipe(recipe), f"recipe {recipe.path.name}"
    found = find_prompting(model_path) if model_path else None
    if found is not None:
        return found[0], str(found[1])
    return Prompting(), None


def say_prompting(prompting, source: str | None) -> None:
    """One line on stderr: where the prompting came from and what it adds."""
    if source is None:
        print("prompting: the rows as they are (pass --config <recipe> to prompt as a recipe trains; a model trained "
              "by rlce-trl records its own)", file=sys.stderr)
        return
    added = [f"prompt_suffix {prompting.prompt_suffix!r}" if prompting.prompt_suffix else "no prompt_suffix"]
    if prompting.reward_method:
        added.append(f"reward_method {prompting.reward_method}")
    added.append(f"chat_template_kwargs {prompting.chat_template_kwargs or {}}")
    print(f"prompting as in training ({source}): {', '.join(added)}", file=sys.stderr)
