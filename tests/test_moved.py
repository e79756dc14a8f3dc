"""Module paths that moved in 0.2 keep working for one release: the old path warns once, naming the new one."""

import importlib
import subprocess
import sys

import pytest

MOVED = [("rlce_trl.video.trainer", "rlce_trl.trainer_video", "VideoGRPOMixin"),
         ("rlce_trl.video.media", "rlce_trl.data.media", "media_items"),
         ("rlce_trl.video", "rlce_trl.config_video", "VideoArguments"),
         ("rlce_trl.baselines", "rlce_trl.methods", "USCScorer")]


@pytest.mark.parametrize("old, new, name", MOVED)
def test_an_old_path_warns_once_and_gives_the_new_objects(old, new, name):
    code = (f"import warnings; warnings.simplefilter('always')\n"
            f"with warnings.catch_warnings(record=True) as caught:\n"
            f"    import {old} as old\n    import {old} as again\n"
            f"print(len([w for w in caught if w.category is FutureWarning and '{new}' in str(w.message)]))\n"
            f"import {new} as new; print(getattr(old, '{name}') is getattr(new, '{name}'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1", "True"]


def test_the_new_paths_do_not_warn(recwarn):
    for _, new, _ in MOVED:
        importlib.import_module(new)
    assert not [w for w in recwarn if w.category is FutureWarning and "moved" in str(w.message)]
