"""`rlce-trl recipes` and `rlce-trl train`: the shipped recipes are reachable by name, each recipe picks its training
script, a recipe trains through the installed entry point, and a wheel carries the recipes as package data."""

import subprocess
import sys
import zipfile

import pytest
from helpers import CONFIGS, ROOT, TINY

from rlce_trl.cli import main
from rlce_trl.training.recipes import list_recipes, load_recipe, recipes_dir, resolve_recipe


def test_recipes_are_the_configs_and_resolve_by_name():
    assert recipes_dir() == CONFIGS
    assert [p.name for p in list_recipes()] == sorted(p.name for p in CONFIGS.glob("*.yaml"))
    assert resolve_recipe("prefeval_rlce") == resolve_recipe("prefeval_rlce.yaml") == CONFIGS / "prefeval_rlce.yaml"
    with pytest.raises(FileNotFoundError, match="quickstart"):
        resolve_recipe("no_such_recipe")


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.stem)
def test_each_recipe_names_its_script(path):
    text = path.read_text()
    if "\ncoevolve_method:" in text:  # a co-evolution recipe: `rlce-trl coevolve` runs it, `train` names that command
        with pytest.raises(ValueError, match="rlce-trl coevolve --method"):
            load_recipe(path).module()
        return
    # the script it names is the one its keys belong to
    expected = "train_hba" if "hba_task:" in text else "train_elect" if "\ngate:" in text else "train_prefeval"
    assert f"\nscript: {expected.removeprefix('train_')}" in text
    assert load_recipe(path).module() == f"rlce_trl.scripts.{expected}"


def test_a_recipe_without_a_known_script_is_one_line_naming_the_fix(tmp_path, capsys):
    recipe = tmp_path / "mine.yaml"
    recipe.write_text("hba_task: mosei\nmax_steps: 1\n")  # keys are no longer sniffed
    with pytest.raises(ValueError, match="mine.yaml names no training script: add a top-level `script: prefeval`"):
        load_recipe(recipe).module()
    recipe.write_text("script: grpo\nmax_steps: 1\n")
    with pytest.raises(ValueError, match="`script: grpo` is not a training script; use one of prefeval, hba, elect"):
        load_recipe(recipe).module()
    assert main(["train", "--config", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: mine.yaml: `script: grpo`")


def test_script_for_rejects_a_non_mapping(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("- just\n- a list\n")
    with pytest.raises(ValueError, match="not a recipe"):
        load_recipe(bad).module()


def test_recipes_command_lists_and_prints(capsys):
    assert main(["recipes"]) == 0
    listing = capsys.readouterr().out
    assert "prefeval_rlce" in listing and "quickstart" in listing
    assert main(["recipes", "quickstart"]) == 0
    assert capsys.readouterr().out == (CONFIGS / "quickstart.yaml").read_text()
    assert main(["recipes", "nope"]) == 2 and "shipped recipes" in capsys.readouterr().err
    assert main(["train", "--config", "nope"]) == 2
    assert main(["train", "--max_steps", "1"]) == 2 and "--config" in capsys.readouterr().err


def test_train_runs_a_shipped_recipe_by_name(tiny_model_dir, tmp_path, monkeypatch):
    out = tmp_path / "quick"
    monkeypatch.setattr(sys, "argv", ["rlce-trl", "train", "--config", "quickstart"])
    code = main(["train", "--config", "quickstart", "--model_name_or_path", tiny_model_dir, "--output_dir", str(out),
                 "--max_steps", "1", "--save_steps", "1", *TINY])
    assert code == 0
    assert (out / "model.safetensors").exists() and "`quickstart`" in (out / "README.md").read_text()


@pytest.mark.slow
def test_wheel_ships_the_recipes_and_scripts(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path)], check=True, cwd=tmp_path, timeout=600)
    (wheel,) = tmp_path.glob("rlce_trl-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in CONFIGS.glob("*.yaml"):
        assert f"rlce_trl/recipes/{path.name}" in names
    assert "rlce_trl/recipes/accelerate/zero3.yaml" in names
    scripts = {f"rlce_trl/scripts/{name}.py" for name in ("train_prefeval", "train_hba", "train_elect")}
    training = {f"rlce_trl/training/{name}.py" for name in ("pipeline", "arguments", "recipes", "tta", "preflight")}
    assert scripts | training <= names
