"""Ships the recipes of `configs/` inside the wheel as `rlce_trl/recipes/` (read by `rlce-trl recipes` and
`rlce-trl train`); everything else is configured in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CONFIGS = Path(__file__).resolve().parent / "configs"


class BuildPyWithRecipes(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "rlce_trl" / "recipes"
        for source in [*CONFIGS.glob("*.yaml"), *CONFIGS.glob("accelerate/*")]:
            destination = target / source.relative_to(CONFIGS)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, destination)


setup(cmdclass={"build_py": BuildPyWithRecipes})
