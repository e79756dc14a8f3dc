"""The shipped YAML recipes and the training script each belongs to (`rlce-trl recipes`, `rlce-trl train`).

The recipes live in `configs/` of a clone; a wheel carries the same files as package data in `rlce_trl/recipes/`
(copied there at build time by `setup.py`), so `rlce-trl train --config prefeval_rlce` works after
`pip install rlce-trl` alone. A recipe is named by its file name (with or without `.yaml`) or given as a path.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError, MissingInputError

#: A recipe's top-level `script` key -> its training script (module under `rlce_trl.scripts`).
SCRIPTS = {
    "prefeval": "rlce_trl.scripts.train_prefeval",
    "hba": "rlce_trl.scripts.train_hba",
    "elect": "rlce_trl.scripts.train_elect",
}


def recipes_dir() -> Path:
    """The folder of shipped recipes: the wheel's package data, else the `configs/` of the checkout this module
    runs from."""
    packaged = Path(__file__).resolve().parents[1] / "recipes"
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parents[3] / "configs"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(
        "No shipped recipes found (neither rlce_trl/recipes/ nor a checkout's configs/): reinstall rlce-trl from a "
        "wheel or run from a clone."
    )


def list_recipes() -> list[Path]:
    """The training recipes (`*.yaml` directly in the recipes folder; accelerate configs excluded)."""
    return sorted(recipes_dir().glob("*.yaml"))


def describe(path: Path) -> str:
    """A recipe's title: the first sentence of its leading comment, which may run over several comment lines (an
    empty comment line, an indented command or a non-comment line ends it)."""
    title = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#") or not line.strip("# ") or line.startswith("#  "):
            if title:
                break
            continue
        title = f"{title} {line.lstrip('# ').strip()}".strip()
        end = title.find(". ")
        if end >= 0:
            return title[: end + 1]
        if title.endswith("."):
            break
    return title


def markdown_table() -> str:
    """The shipped recipes as a Markdown table (name, title, the command that runs it): the README's recipe table."""
    import yaml

    rows = ["| recipe | what it is | run with |", "|---|---|---|"]
    for path in list_recipes():
        content = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        method = content.get("coevolve_method") if isinstance(content, dict) else None
        command = f"`rlce-trl coevolve --method {method}`" if method else "`rlce-trl train`"
        rows.append(f"| `{path.stem}` | {describe(path).replace('|', '/').replace('<', '&lt;')} | {command} |")
    return "\n".join(rows)


def resolve_recipe(name_or_path: str) -> Path:
    """A path that exists, else a shipped recipe by name (`prefeval_rlce` or `prefeval_rlce.yaml`)."""
    path = Path(os.path.expanduser(name_or_path))
    if path.is_file():
        return path
    stem = path.name[: -len(".yaml")] if path.name.endswith(".yaml") else path.name
    shipped = recipes_dir() / f"{stem}.yaml"
    if shipped.is_file():
        return shipped
    names = ", ".join(p.stem for p in list_recipes())
    raise MissingInputError(f"No recipe {name_or_path!r}: give a YAML path or one of the shipped recipes: {names}.")


def yaml_problem(error) -> str:
    """A YAML error in one line: what is wrong and where (`line N, column M: ...`)."""
    mark = getattr(error, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + " ".join(str(getattr(error, "problem", None) or error).split())


def script_for(recipe: Path) -> str:
    """The module that trains `recipe`: the one its top-level `script` key names (`prefeval`, `hba` or `elect`). A
    co-evolution recipe (`coevolve_method`), a recipe without `script` or with an unknown one is an [`InputError`] that
    names the fix."""
    import yaml

    try:
        content = yaml.safe_load(recipe.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as error:
        raise InputError(f"recipe {recipe} is not UTF-8 text (byte {error.start}): save it as UTF-8.") from None
    except yaml.YAMLError as error:
        raise InputError(f"{recipe.name} is not valid YAML ({yaml_problem(error)}); fix it or pass another "
                         "--config.") from None
    if not isinstance(content, dict):
        raise InputError(f"{recipe.name} is not a recipe (a YAML mapping of argument names to values).")
    if "coevolve_method" in content:
        raise InputError(f"{recipe.name} is a co-evolution recipe: run it with `rlce-trl coevolve --method "
                         f"{content['coevolve_method']} --config {recipe.stem} --train_file ... --output_dir ...`.")
    script = content.get("script")
    if script is None:
        raise InputError(f"{recipe.name} names no training script: add a top-level `script: prefeval` line (or "
                         f"{', '.join(s for s in SCRIPTS if s != 'prefeval')}).")
    if script not in SCRIPTS:
        raise InputError(f"{recipe.name}: `script: {script}` is not a training script; use one of "
                         f"{', '.join(SCRIPTS)}.")
    return SCRIPTS[script]


def train(argv: list[str]) -> int:
    """`rlce-trl train --config <recipe> [overrides]`: run the recipe's training script in this process (under
    `accelerate launch -m rlce_trl.cli train ...` for several GPUs)."""
    import importlib

    if "--config" not in argv or argv.index("--config") + 1 >= len(argv):
        raise InputError("rlce-trl train needs --config <recipe>: a YAML path or a name from `rlce-trl recipes`.")
    argv = list(argv)
    at = argv.index("--config") + 1
    recipe = resolve_recipe(argv[at])
    argv[at] = str(recipe)
    module = script_for(recipe)
    script = importlib.import_module(module)
    if module == SCRIPTS["elect"]:  # an argparse script: it reads --config itself
        script.main(argv)
        return 0
    script_args, training_args, model_args = script.make_parser().parse_args_and_config(argv)
    script.main(script_args, training_args, model_args)
    return 0
