"""Fixtures for the data builders: a synthetic PrefEval-shaped checkout written by the tests (never real PrefEval
content, which is CC BY-NC). The real checkout, when PREFEVAL_DIR names one, is the `real_prefeval` fixture of
tests/conftest.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FAKE_TOPICS = {"cooking_tools": 10, "garden_plants": 7}


def _write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj), encoding="utf-8")


def make_fake_prefeval(root: Path, persona_turns: int = 3, persona_chars: int = 100) -> Path:
    """A minimal checkout with the benchmark's folder layout and record keys, filled with generated text."""
    bench = root / "benchmark_dataset"
    for topic, n in FAKE_TOPICS.items():
        explicit, choice, persona = [], [], []
        for i in range(n):
            base = {
                "preference": f"I never use {topic} item {i}.",
                "question": f"What do you suggest for {topic} project {i}?",
                "explanation": "generated",
            }
            explicit.append(base)
            choice.append(
                {
                    **base,
                    "conversation": {
                        "query": f"Which {topic} option {i}?",
                        "assistant_options": "1. alpha 2. beta 3. gamma 4. delta",
                        "user_selection": "I'll take beta.",
                        "assistant_acknowledgment": "Beta it is.",
                    },
                }
            )
            persona.append(
                {
                    **base,
                    "persona": "a tester",
                    "conversation": {
                        str(k): {"user": f"u{k} " + "x" * persona_chars, "assistant": f"a{k}"}
                        for k in range(persona_turns)
                    },
                }
            )
        _write(bench / "explicit_preference" / f"{topic}.json", explicit)
        _write(bench / "implicit_preference" / "choice-based" / f"{topic}.json", choice)
        _write(bench / "implicit_preference" / "persona-driven" / f"{topic}.json", persona)
    conversations = []
    for c in range(4):
        messages = []
        for t in range(6):
            # lengths 25..: pair lengths spread over both sides of the 60..1200 bounds
            messages.append({"role": "user", "content": f"question {c}-{t} " + "q" * (10 * t)})
            messages.append({"role": "assistant", "content": f"answer {c}-{t} " + "a" * (250 * t)})
        conversations.append({"conversation_id": str(c), "conversation": messages})
    _write(bench / "filtered_inter_turns.json", conversations)
    return root


@pytest.fixture
def prefeval_factory():
    """`make_fake_prefeval` itself, for tests that need other sizes."""
    return make_fake_prefeval


@pytest.fixture
def fake_topics() -> dict[str, int]:
    return dict(FAKE_TOPICS)


@pytest.fixture
def fake_prefeval(tmp_path) -> Path:
    return make_fake_prefeval(tmp_path / "PrefEval")
