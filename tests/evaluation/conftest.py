"""A tiny OpenAI-compatible chat-completions stand-in on 127.0.0.1, scripted by each test."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


class FakeJudge:
    """`script(prompt_text, call_index) -> str | int`: a reply text, or an HTTP status code to fail with."""

    def __init__(self, script):
        self.script = script
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.lock = threading.Lock()
        judge = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with judge.lock:
                    index = len(judge.requests)
                    judge.requests.append(body)
                    judge.headers.append(dict(self.headers))
                prompt = body["messages"][-1]["content"]
                reply = judge.script(prompt, index)
                if isinstance(reply, int):
                    self.send_response(reply)
                    self.end_headers()
                    self.wfile.write(b'{"error": "scripted failure"}')
                    return
                payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_judge():
    servers = []

    def start(script):
        server = FakeJudge(script)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


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
