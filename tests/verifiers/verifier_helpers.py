"""Helpers of the verifier-backend tests (imported by conftest.py and the test modules): a FAKE OpenAI-compatible
server on 127.0.0.1 for the fault tests, free ports, and a FAKE vLLM server script for the lifecycle tests. (The tiny
chat model vLLM's CPU backend accepts is `tests/tiny.py::build_tiny_chat_model`.)

The fake is not vLLM: it answers `/health`, `/v1/models` and `/v1/chat/completions` with canned text, and can be told
to be slow, to fail with 5xx a number of times, to reject structured outputs, or to stop listening.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from rlce_trl.verifiers.vllm_process import free_port  # noqa: F401 - re-exported for the test modules


class FakeOpenAIServer:
    """A FAKE chat-completions server for fault tests. Behaviour knobs are plain attributes, changeable mid-test."""

    def __init__(self, port: int | None = None):
        self.port = port or free_port()
        self.delay_s = 0.0  # sleep before answering a completion
        self.fail_next = 0  # answer this many completions with `fail_status`
        self.fail_status = 503
        self.reject_structured = False  # 400 when the body has `structured_outputs`
        self.health_status = 200
        self.trickle_s = 0.0  # send a completion's body one byte at a time, this long apart (a hostile server)
        self.padding_bytes = 0  # pad every completion reply with this many bytes (an oversized reply)
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeOpenAIServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def setup(self):
                super().setup()
                with fake.lock:
                    fake._connections.add(self.connection)

            def finish(self):
                with fake.lock:
                    fake._connections.discard(self.connection)
                try:
                    super().finish()
                except OSError:
                    pass

            def _send(self, status: int, payload, completion: bool = False) -> None:
                if completion and fake.padding_bytes:
                    payload = {**payload, "padding": "x" * fake.padding_bytes}
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    if completion and fake.trickle_s:
                        for k in range(len(data)):
                            self.wfile.write(data[k : k + 1])
                            self.wfile.flush()
                            time.sleep(fake.trickle_s)
                    else:
                        self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):
                if self.path == "/health":
                    self._send(fake.health_status, {})
                elif self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": "fake-verifier", "object": "model"}]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path != "/v1/chat/completions":
                    self._send(404, {"error": "not found"})
                    return
                with fake.lock:
                    fake.bodies.append(body)
                    fail = fake.fail_next > 0
                    if fail:
                        fake.fail_next -= 1
                if fake.delay_s:
                    time.sleep(fake.delay_s)
                if fail:
                    self._send(fake.fail_status, {"error": "fake server error"})
                    return
                if fake.reject_structured and "structured_outputs" in body:
                    self._send(400, {"error": {"message": "Extra inputs are not permitted: structured_outputs"}})
                    return
                n = body.get("n", 1)
                last = body["messages"][-1]["content"]
                so = body.get("structured_outputs") or {}
                text = so["choice"][0] if "choice" in so else f"echo: {last[-40:]}"
                self._send(200, {
                    "id": "fake", "object": "chat.completion", "model": body.get("model"),
                    "choices": [
                        {"index": k, "message": {"role": "assistant", "content": f"{text}" if n == 1 else f"{text} #{k}"},
                         "finish_reason": "stop"}
                        for k in range(n)
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 3 * n, "total_tokens": 10 + 3 * n},
                }, completion=True)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):  # a client that hung up (timeout tests): not news
                pass

        self._httpd = Server(("127.0.0.1", self.port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening (connections are refused afterwards), like a server process that died."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            with self.lock:  # keep-alive connections too: a dead process answers nothing
                connections, self._connections = list(self._connections), set()
            for connection in connections:
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                connection.close()
            self._httpd = None
            self._thread.join(timeout=5)



FAKE_VLLM_API_SERVER = '''"""FAKE `vllm.entrypoints.openai.api_server` for lifecycle tests: serves the fake OpenAI server, spawns a
grandchild (like vLLM's engine-core process) and writes both pids to $FAKE_VLLM_PIDS."""
import argparse, os, subprocess, sys, time

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int)
parser.add_argument("--host")
args, _ = parser.parse_known_args()
if os.environ.get("FAKE_VLLM_EXIT_AT_START"):
    print("fake vllm: failing at start-up on purpose", flush=True)
    sys.exit(int(os.environ["FAKE_VLLM_EXIT_AT_START"]))
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
import signal
def _term(signum, frame):  # like vLLM: the API server shuts its engine-core process down on SIGTERM
    child.kill()
    sys.exit(0)
signal.signal(signal.SIGTERM, _term)
if os.environ.get("FAKE_VLLM_PIDS"):
    with open(os.environ["FAKE_VLLM_PIDS"], "a") as f:
        f.write(f"{os.getpid()} {child.pid}\\n")
print("fake vllm: up", flush=True)
if not os.environ.get("FAKE_VLLM_NEVER_HEALTHY"):
    from verifier_helpers import FakeOpenAIServer
    FakeOpenAIServer(args.port).start()
deadline = time.monotonic() + 600
while time.monotonic() < deadline:
    time.sleep(0.2)
'''


def make_fake_vllm(directory: Path) -> dict[str, str]:
    """Write the FAKE vLLM package under `directory`; returns the env that makes `python -m vllm...` find it."""
    package = Path(directory) / "vllm" / "entrypoints" / "openai"
    package.mkdir(parents=True, exist_ok=True)
    for init in (Path(directory) / "vllm", Path(directory) / "vllm" / "entrypoints", package):
        (init / "__init__.py").write_text("")
    (package / "api_server.py").write_text(FAKE_VLLM_API_SERVER)
    here = str(Path(__file__).resolve().parent)
    return {"PYTHONPATH": os.pathsep.join([str(directory), here])}


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie still answers kill(0): look at its state
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def wait_gone(pids, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(pid_alive(p) for p in pids):
            return True
        time.sleep(0.1)
    return False
