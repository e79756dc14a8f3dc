"""Recipes: [`load_recipe`] is the one reader of a recipe file (a shipped name or a path; its kind, its task, its
training script and its values, with one-line errors), and the shipped recipes (`rlce-trl recipes`).

The recipes live in `configs/` of a clone; a wheel carries the same files as package data in `rlce_trl/recipes/`
(copied there at build time by `setup.py`), so `rlce-trl train --config prefeval_rlce` works after
`pip install rlce-trl` alone. A recipe is named by its file name (with or without `.yaml`) or given as a path.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError, MissingInputError, first_line

#: A recipe's top-level `script` key -> its training script (module under `rlce_trl.scripts`).
SCRIPTS = {"prefeval": "rlce_trl.scripts.train_prefeval", "hba": "rlce_trl.scripts.train_hba",
           "elect": "rlce_trl.scripts.train_elect"}


def recipes_dir() -> Path:
    """The folder of shipped recipes: the wheel's package data, else the `configs/` of the checkout this module
    runs from."""
    packaged = Path(__file__).resolve().parents[1] / "recipes"
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parents[3] / "configs"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError("No shipped recipes found (neither rlce_trl/recipes/ nor a checkout's configs/): "
                            "reinstall rlce-trl from a wheel or run from a clone.")


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
    rows = ["| recipe | what it is | run with |", "|---|---|---|"]
    for path in list_recipes():
        recipe = load_recipe(path)
        command = (f"`rlce-trl coevolve --method {recipe.coevolve_method}`" if recipe.kind == "coevolve"
                   else "`rlce-trl train`")
        rows.append(f"| `{path.stem}` | {describe(path).replace('|', '/').replace('<', '&lt;')} | {command} |")
    return "\n".join(rows)


@dataclass(frozen=True)
class Recipe:
    """A recipe file, read once by [`load_recipe`]: its path and values, and what they decide (its kind, task and
    training script)."""

    path: Path
    values: dict

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def kind(self) -> str:
        """`"coevolve"` when it sets `coevolve_method` (`rlce-trl coevolve` runs it), else `"train"` (`rlce-trl
        train`): the one place that decides whether a recipe is a co-evolution."""
        return "coevolve" if "coevolve_method" in self.values else "train"

    @property
    def coevolve_method(self) -> str | None:
        return self.values.get("coevolve_method")

    @property
    def task(self) -> str:
        """The task it trains on, by its name in the task registry (`rlce_trl.data.tasks`): its `hba_task`, the
        numbered-evidence task for the Elect script, else PrefEval."""
        if self.values.get("hba_task"):
            return self.values["hba_task"]
        from ..data.prefeval import TASK as PREFEVAL_TASK
        from ..data.synthetic import TASK as NUMBERED_EVIDENCE

        return NUMBERED_EVIDENCE if self.values.get("script") == "elect" else PREFEVAL_TASK

    def module(self) -> str:
        """The training script that runs it (module under `rlce_trl.scripts`): the one its top-level `script` key
        names. A co-evolution recipe, a recipe without `script` or with an unknown one is an [`InputError`] that
        names the fix."""
        if self.kind == "coevolve":
            raise InputError(f"{self.name} is a co-evolution recipe: run it with `rlce-trl coevolve --method "
                             f"{self.coevolve_method} --config {self.path.stem} --train_file ... --output_dir ...`.")
        script = self.values.get("script")
        if script is None:
            first, *others = SCRIPTS
            raise InputError(f"{self.name} names no training script: add a top-level `script: {first}` line (or "
                             f"{', '.join(others)}).")
        if script not in SCRIPTS:
            raise InputError(f"{self.name}: `script: {script}` is not a training script; use one of "
                             f"{', '.join(SCRIPTS)}.")
        return SCRIPTS[script]


def load_recipe(name_or_path: str | os.PathLike) -> Recipe:
    """The recipe named (a path, else a shipped recipe's name): a missing file, a file that is not UTF-8, not YAML or
    not a mapping is one [`InputError`] naming the file and the fix. An empty file is a recipe with no values."""
    import yaml

    path = resolve_recipe(os.fspath(name_or_path))
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise InputError(f"recipe {path} is not UTF-8 text (byte {error.start}): save it as UTF-8.") from None
    except yaml.YAMLError as error:
        raise InputError(f"recipe {path} is not valid YAML ({yaml_problem(error)}): fix it or pass another "
                         "recipe.") from None
    except OSError as error:
        raise MissingInputError(f"recipe {path} cannot be read ({first_line(error)}).") from None
    if values is not None and not isinstance(values, dict):
        raise InputError(f"recipe {path} is not a recipe: a recipe is a YAML mapping of argument names to values, "
                         f"not a {type(values).__name__}.")
    return Recipe(path, values or {})


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


def train(argv: list[str]) -> int:
    """`rlce-trl train --config <recipe> [overrides]`: run the recipe's training script in this process (under
    `accelerate launch -m rlce_trl.cli train ...` for several GPUs)."""
    if "--config" not in argv or argv.index("--config") + 1 >= len(argv):
        raise InputError("rlce-trl train needs --config <recipe>: a YAML path or a name from `rlce-trl recipes`.")
    recipe = load_recipe(argv[argv.index("--config") + 1])  # the parser reads it again: the card names it as given
    script = importlib.import_module(recipe.module())
    script.main(*script.make_parser().parse_args_and_config(argv))
    return 0
