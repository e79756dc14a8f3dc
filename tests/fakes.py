"""The tests' FAKES, in one module: stand-ins only where the real component cannot run here or a test must choose
the replies. Real backends are tested against real (tiny or SmolLM2) models.

- `ScriptedVerifier` / `evidence_verifier`: a verifier backend whose replies the test chooses, to test the method as
  arithmetic (which requests are made, how replies are read).
- `PromptSensitiveSyntheticVerifier`, `LogprobVerifier`: calibration's fake validators.
- `FakeOpenAIServer`: ONE fake OpenAI-compatible chat-completions server on 127.0.0.1, for the verifier fault tests
  (knobs: slow, 5xx, no structured outputs, trickling, oversized, dead) and the judge tests (`script`).
- `make_fake_vllm`: a FAKE `vllm.entrypoints.openai.api_server` for the process-lifecycle tests.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from testing_utils import free_port

from rlce_trl.calibration.cases import CalibrationCase
from rlce_trl.verifiers.base import Reply, Request, Verifier


# -- scripted verifiers ---------------------------------------------------------------------------------------------
class ScriptedVerifier(Verifier):
    """`reply(request) -> str | list[str]`: the text(s) for one request (a str is repeated `n` times)."""

    name = "scripted"

    def __init__(self, reply):
        super().__init__()
        self.reply = reply
        self.batches: list[list[Request]] = []

    def _generate(self, requests):
        self.batches.append(requests)
        replies = []
        for request in requests:
            texts = self.reply(request)
            texts = [texts] * request.sampling.n if isinstance(texts, str) else list(texts)
            replies.append(Reply(texts=texts, finish_reasons=["stop"] * len(texts), num_tokens=len(texts)))
        return replies


def answers_of(request: Request) -> tuple[str, str] | tuple[str]:
    """The candidate answer(s) named in a construction request."""
    text = request.messages[-1]["content"]
    pair = re.search(r"Answer A: (.*)\nAnswer B: (.*)\n", text)
    if pair:
        return pair.group(1), pair.group(2)
    return (re.search(r"candidate answer to the final request in the input is: (.*)\n", text).group(1),)


def claim_of(request: Request) -> str:
    return re.search(r"Claim: (.*)\n", request.messages[-1]["content"]).group(1)


def evidence_verifier(verdicts: dict, equivalent: set = frozenset()):
    """Construction writes the test "A>B" for a pair; validation answers `verdicts["A>B"]` (a str, or a list consumed
    in order for repeated tests, default "unknown"); equivalence calls the pairs in `equivalent` ("A=B") "same"."""
    remaining = {k: list(v) if isinstance(v, list) else v for k, v in verdicts.items()}

    def reply(request: Request):
        if request.stage == "construction":
            answers = answers_of(request)
            return f"{answers[0]}>{answers[1]}" if len(answers) == 2 else f"{answers[0]}+"
        if request.stage == "validation":
            claim = claim_of(request)
            value = remaining.get(claim, "unknown")
            return value.pop(0) if isinstance(value, list) else value
        if request.stage == "equivalence":
            listed = dict(re.findall(r"^(\d+)\. (.*)$", request.messages[-1]["content"], flags=re.M))
            pairs = re.findall(r"^P(\d+): (\d+) and (\d+)$", request.messages[-1]["content"], flags=re.M)
            out = {f"P{m}": "same" if f"{listed[i]}={listed[j]}" in equivalent else "different" for m, i, j in pairs}
            return json.dumps(out)
        raise AssertionError(request.stage)

    return ScriptedVerifier(reply)


# -- calibration's fake validators ------------------------------------------------------------------------------------
_CASE = re.compile(r"case (\S+) truth (yes|no|unknown) dist (\w+)")


def synthetic_cases(dist: str, n: int, split: str = "calibration") -> list[CalibrationCase]:
    """Balanced yes/no cases whose context names its truth and distribution (only the fake verifier reads it)."""
    return [
        CalibrationCase(f"{dist}{i}", f"case {dist}{i} truth {'yes' if i % 2 else 'no'} dist {dist}", f"claim {i}",
                        "yes" if i % 2 else "no", split, source=dist)
        for i in range(n)
    ]


class PromptSensitiveSyntheticVerifier(Verifier):
    """A fake validator whose error rate depends on the prompt version and the case distribution.

    `errors[(marker, dist)]` is the error rate when the validation instruction contains `marker` (the first marker
    found wins; "" matches any prompt). Wrong cases are a fixed, seeded subset of each distribution, so two prompts
    with the same rate on a distribution make the same errors there. Counts calls, so tests can assert batching."""

    name = "synthetic"

    def __init__(self, errors: dict[tuple[str, str], float], seed: int = 0):
        super().__init__()
        self.errors, self.seed = errors, seed

    def _wrong(self, case_id: str, dist: str, rate: float) -> bool:
        # a fixed per-case draw: the same cases are wrong at the same rate, and more cases at a higher rate
        return random.Random(f"{self.seed}:{case_id}").random() < rate

    def _generate(self, requests: list[Request]) -> list[Reply]:
        replies = []
        for request in requests:
            text = request.messages[-1]["content"]
            match = _CASE.search(text)
            if match is None:
                replies.append(Reply(["unknown"], ["stop"], 1))
                continue
            case_id, truth, dist = match.groups()
            rate = next((r for (marker, d), r in self.errors.items() if d == dist and marker in text), 0.0)
            verdict = {"yes": "no", "no": "yes"}.get(truth, truth) if self._wrong(case_id, dist, rate) else truth
            replies.append(Reply([verdict], ["stop"], 1))
        return replies


class LogprobVerifier(Verifier):
    """A fake backend that returns fixed choice log-probabilities per claim text (`table[claim]`), and the argmax
    text."""

    name = "logprob-fake"

    def __init__(self, table: dict[str, dict[str, float]], default: dict[str, float]):
        super().__init__()
        self.table, self.default = table, default

    def _generate(self, requests: list[Request]) -> list[Reply]:
        replies = []
        for request in requests:
            claim = re.search(r"Claim: (.*)", request.messages[-1]["content"])
            logprobs = self.table.get(claim.group(1) if claim else "", self.default)
            best = max(logprobs, key=logprobs.get)
            replies.append(Reply([best], ["stop"], 1, choice_logprobs=dict(logprobs)))
        return replies


def lp(yes: float, no: float, unknown: float) -> dict[str, float]:
    return {"yes": math.log(yes), "no": math.log(no), "unknown": math.log(unknown)}


# -- a fake OpenAI-compatible server ---------------------------------------------------------------------------------
class FakeOpenAIServer:
    """A FAKE chat-completions server. Behaviour knobs are plain attributes, changeable mid-test.

    `script(prompt_text, call_index) -> str | int`, when given, writes each reply (the judge tests): a text, or an HTTP
    status code to fail with. Without it the server echoes the prompt's end, or the first structured-output choice.
    """

    def __init__(self, port: int | None = None, script=None):
        self.port = port or free_port()
        self.script = script
        self.delay_s = 0.0  # sleep before answering a completion
        self.fail_next = 0  # answer this many completions with `fail_status`
        self.fail_status = 503
        self.reject_structured = False  # 400 when the body has `structured_outputs`
        self.health_status = 200
        self.trickle_s = 0.0  # send a completion's body one byte at a time, this long apart (a hostile server)
        self.padding_bytes = 0  # pad every completion reply with this many bytes (an oversized reply)
        self.bodies: list[dict] = []  # every completion request, in arrival order
        self.headers: list[dict] = []  # and its HTTP headers
        self.lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (`.../v1`), as clients take it."""
        return f"{self.url}/v1"

    @property
    def requests(self) -> list[dict]:
        return self.bodies

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
                    index = len(fake.bodies)
                    fake.bodies.append(body)
                    fake.headers.append(dict(self.headers))
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
                if fake.script is not None:
                    text = fake.script(last, index)
                    if isinstance(text, int):
                        self._send(text, {"error": "scripted failure"})
                        return
                self._send(200, {
                    "id": "fake", "object": "chat.completion", "model": body.get("model"),
                    "choices": [
                        {"index": k,
                         "message": {"role": "assistant", "content": f"{text}" if n == 1 else f"{text} #{k}"},
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


# -- a fake vLLM server process --------------------------------------------------------------------------------------
FAKE_VLLM_API_SERVER = '''"""FAKE `vllm.entrypoints.openai.api_server` for lifecycle tests: serves the fake OpenAI
server, spawns a grandchild (like vLLM's engine-core process) and writes both pids to $FAKE_VLLM_PIDS."""
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
    from fakes import FakeOpenAIServer
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

