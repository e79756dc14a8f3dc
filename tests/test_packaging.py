"""The wheel holds every file the code reads from its own package: the wheel is built here (from the sdist, as
`pip install rlce-trl` gets it) and its file list compared with the package's data files, the recipes that setup.py
copies in, and the files the package's readers return. A new reader of package files fails the first test until it
is listed here with what it reads. The wheel installed into a fresh environment and run is CI's wheel stage
(tools/wheel_check.sh)."""

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "rlce_trl"
#: Modules that read files of their own package (`__file__`, `importlib.resources`): a new one belongs here, with a
#: check in `test_every_file_a_reader_returns_is_in_the_wheel` of the files it reads.
READERS = {"training/recipes.py", "verifiers/calibrated.py", "data/sample.py"}


def test_every_reader_of_package_files_is_known():
    found = {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
             if re.search(r"__file__|resources\.files\(", path.read_text(encoding="utf-8"))}
    assert found == READERS, f"new readers of package files: {found - READERS}; gone: {READERS - found}"


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory) -> set[str]:
    """The file list of the wheel built from the sdist of the working tree's files (tracked and not ignored)."""
    work = tmp_path_factory.mktemp("wheel")
    tree = work / "tree"
    tree.mkdir()
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            (tree / name).write_bytes(source.read_bytes())
    command = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(work / "dist"), str(tree)]
    built = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = (work / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_the_wheel_holds_every_module_and_data_file_of_the_package(wheel_files):
    source = {f"rlce_trl/{path.relative_to(PACKAGE)}" for path in PACKAGE.rglob("*")
              if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"}
    assert source - wheel_files == set(), "files of src/rlce_trl missing from the wheel: add them to package-data"
    recipes = {f"rlce_trl/recipes/{path.relative_to(REPO / 'configs')}"
               for path in [*(REPO / "configs").glob("*.yaml"), *(REPO / "configs" / "accelerate").iterdir()]}
    assert recipes - wheel_files == set()
    stray = {name for name in wheel_files if not name.startswith(("rlce_trl/", "rlce_trl-"))}
    assert not stray, f"the wheel holds files outside the package: {sorted(stray)[:5]}"


def test_every_file_a_reader_returns_is_in_the_wheel(wheel_files):
    from rlce_trl.data.sample import SAMPLE_FILE
    from rlce_trl.training.recipes import list_recipes
    from rlce_trl.verifiers.calibrated import builtin_calibration

    read = {PACKAGE / "data" / SAMPLE_FILE, builtin_calibration("smollm2-135m-instruct")}
    assert all(path.is_file() for path in read), read
    names = {f"rlce_trl/{Path(path).resolve().relative_to(PACKAGE)}" for path in read}
    names |= {f"rlce_trl/recipes/{path.name}" for path in list_recipes()}
    assert names - wheel_files == set()
    assert "rlce_trl/recipes/quickstart.yaml" in names and "rlce_trl/py.typed" in wheel_files
