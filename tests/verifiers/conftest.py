"""Fixtures of the verifier-backend tests; the helpers themselves live in `verifier_helpers.py`."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny import build_tiny_chat_model
from verifier_helpers import FakeOpenAIServer


@pytest.fixture
def fake_server():
    server = FakeOpenAIServer().start()
    yield server
    server.stop()


@pytest.fixture
def fake_server_factory():
    servers: list[FakeOpenAIServer] = []

    def make() -> FakeOpenAIServer:
        server = FakeOpenAIServer().start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def tiny_chat_model(tmp_path_factory) -> Path:
    return build_tiny_chat_model(tmp_path_factory.mktemp("tiny-chat-model"))
