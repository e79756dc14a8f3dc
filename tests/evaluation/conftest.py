"""Fixtures of the evaluation tests: stand-in PrefEval judge prompts. (The fake judge server is the `fake_judge`
fixture of tests/conftest.py: `fakes.FakeOpenAIServer` with a `script`.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


#: Our own stand-in check prompts with PrefEval's placeholder names and reply formats (the real prompts are CC BY-NC
#: and stay in the checkout).
STAND_IN_PROMPTS = {
    "check_acknowledge.txt": "CHECK=acknowledge\nQ: {question}\nR: {end_generation}\n<preference>..</preference>",
    "check_hallucination.txt": "CHECK=hallucination\nP: {preference}\nS: {assistant_restatement}",
    "check_violation.txt": "CHECK=violation\nP: {preference}\nQ: {question}\nR: {end_generation}",
    "check_helpful.txt": "CHECK=helpful\nQ: {question}\nR: {end_generation}",
}


@pytest.fixture
def stand_in_prefeval(tmp_path) -> Path:
    root = tmp_path / "PrefEvalPrompts"
    (root / "error_type").mkdir(parents=True)
    for name, text in STAND_IN_PROMPTS.items():
        (root / "error_type" / name).write_text(text)
    return root
