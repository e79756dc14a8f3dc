"""The tree's layering: the import contract holds, it can fail, and README's Layout section names every part."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "rlce_trl"
LINT = Path(sys.executable).with_name("lint-imports")
#: Not layers: the package's own `__init__` and files that are not modules.
NOT_LAYERS = {"__init__", "py", "recipes", "__pycache__"}


def parts_of_tree() -> set[str]:
    return {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
            if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())) and p.stem not in NOT_LAYERS}


def layout_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.search(r"^## Layout\n(.*?)^## ", text, re.S | re.M).group(1)


def test_readme_layout_names_every_part_of_the_tree():
    listed = set(re.findall(r"^  (\w+)(?:/|\.py)", layout_section(), re.M))
    listed |= set(re.findall(r"; (\w+)\.py:", layout_section()))
    tree = parts_of_tree()
    assert not tree - listed, f"README Layout misses {sorted(tree - listed)}"
    assert not listed - tree, f"README Layout names {sorted(listed - tree)}, which are not in src/rlce_trl"


def test_every_part_of_the_tree_is_in_a_layer():
    import tomllib

    contract = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    layered = {name.strip().removeprefix("rlce_trl.") for layer in contract["layers"] for name in layer.split("|")}
    assert parts_of_tree() <= layered, f"not in any layer: {sorted(parts_of_tree() - layered)}"


def _lint(src: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT), str(ROOT / "pyproject.toml"), "--no-cache"], cwd=ROOT,
                          env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed (the test extra has it)")
def test_contract_holds_and_fails_on_an_upward_import(tmp_path):
    kept = _lint(ROOT / "src")
    assert kept.returncode == 0, kept.stdout[-2000:]
    shutil.copytree(ROOT / "src" / "rlce_trl", tmp_path / "rlce_trl", ignore=shutil.ignore_patterns("__pycache__"))
    scoring = tmp_path / "rlce_trl" / "scoring.py"
    scoring.write_text(scoring.read_text() + "\nfrom .trainer import RLCEGRPOTrainer  # noqa\n")
    broken = _lint(tmp_path)
    assert broken.returncode != 0 and "rlce_trl.scoring is not allowed to import rlce_trl.trainer" in broken.stdout
