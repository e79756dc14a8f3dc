"""The one HTTP client of the package for OpenAI-compatible servers (vLLM, `transformers serve`, a hosted API): the
verifier server backend ([`~rlce_trl.verifiers.server.ServerVerifier`]) and the evaluation judges
([`~rlce_trl.evaluation.judges.OpenAIJudgeClient`]) both send their requests through it.

What it guarantees for every request:

- **an overall deadline**: connect, send, every read of the reply and (with [`OpenAIHTTPClient.post_with_retries`])
  every retry and backoff together end by `deadline`. The read timeout is re-armed to the time left before each
  read, so a server that trickles one byte at a time cannot hold a request past it;
- **a reply-size cap**: a reply larger than `max_reply_bytes` (declared or streamed, decompressed) is abandoned;
- **retries with backoff** on connect errors, timeouts, 429 and 5xx (exponential, with jitter, capped);
- **no credential in a message**: the API key is read from the environment variable `api_key_env` at each request
  (never stored), and every error message names URLs without user-info or query string, with the reply text
  scrubbed ([`rlce_trl.credentials.scrub`]).

`httpx` is imported when a client is built, so importing this module costs nothing.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from dataclasses import dataclass

from ..credentials import clean_url, scrub


class HTTPRequestError(Exception):
    """A request that did not give a usable reply. `retryable`: another attempt may succeed (connect error, timeout,
    429, 5xx, reply not JSON); `connect`: the server did not answer at all; `status` / `body`: an HTTP error reply."""

    def __init__(self, message: str, *, retryable: bool, connect: bool = False, status: int | None = None,
                 body: str = ""):
        super().__init__(scrub(message))
        self.retryable, self.connect, self.status, self.body = retryable, connect, status, body


@dataclass
class TransportStats:
    """Counters of one client (all attempts)."""

    http_requests: int = 0
    retries: int = 0
    timeouts: int = 0
    connect_errors: int = 0
    server_errors: int = 0  # 429 and 5xx
    client_errors: int = 0  # other 4xx
    oversized_replies: int = 0
    structured_output_fallbacks: int = 0  # counted by the verifier server client (`ServerVerifier`)


class OpenAIHTTPClient:
    """A thread-safe client for OpenAI-compatible endpoints.

    Args:
        timeout_s: longest wait for any one read (or write) of a request, seconds.
        connect_timeout_s: connect timeout, seconds.
        deadline_s: overall deadline of one request, all attempts included ([`post_with_retries`]), seconds; `None`:
            only `timeout_s` per read applies.
        max_reply_bytes: largest reply accepted.
        max_retries: retries after a retryable failure in [`post_with_retries`].
        backoff_s, max_backoff_s: first retry delay (doubling, with jitter) and its cap.
        api_key_env: environment variable holding a bearer token, read at each request; `None` or unset: no header.
        max_connections: connection pool size.
    """

    def __init__(self, *, timeout_s: float = 300.0, connect_timeout_s: float = 5.0, deadline_s: float | None = None,
                 max_reply_bytes: int = 16_000_000, max_retries: int = 3, backoff_s: float = 1.0,
                 max_backoff_s: float = 30.0, api_key_env: str | None = None, max_connections: int = 64):
        import httpx

        if timeout_s <= 0 or connect_timeout_s <= 0 or max_retries < 0 or backoff_s < 0 or max_reply_bytes < 1:
            raise ValueError("timeout_s > 0, connect_timeout_s > 0, max_retries >= 0, backoff_s >= 0 and "
                             "max_reply_bytes >= 1 are required.")
        if deadline_s is not None and deadline_s <= 0:
            raise ValueError("deadline_s must be > 0 seconds (or None).")
        self.timeout_s, self.connect_timeout_s, self.deadline_s = timeout_s, connect_timeout_s, deadline_s
        self.max_reply_bytes, self.max_retries = max_reply_bytes, max_retries
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self.api_key_env = api_key_env
        self.stats = TransportStats()
        self.lock = threading.Lock()
        limits = httpx.Limits(max_connections=max_connections + 4, max_keepalive_connections=max_connections)
        # trust_env=False: proxies from the environment must never intercept loopback / cluster-internal servers.
        self.client = httpx.Client(limits=limits, timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
                                   trust_env=False)
        self.closed = False

    def __repr__(self) -> str:
        return (f"OpenAIHTTPClient(timeout_s={self.timeout_s}, deadline_s={self.deadline_s}, "
                f"key_env={self.api_key_env})")

    def auth_headers(self) -> dict[str, str]:
        token = os.environ.get(self.api_key_env) if self.api_key_env else None
        return {"Authorization": f"Bearer {token}"} if token else {}

    def new_deadline(self) -> float | None:
        """The monotonic time a request started now must end by (`None`: no overall deadline)."""
        return time.monotonic() + self.deadline_s if self.deadline_s else None

    def get_status(self, url: str, timeout: float) -> int | str:
        """The HTTP status of a GET of `url` (a probe), or why there is none (a scrubbed one-liner)."""
        import httpx

        try:
            return self.client.get(url, timeout=timeout, headers=self.auth_headers()).status_code
        except httpx.HTTPError as error:
            return scrub(f"{type(error).__name__}: {error}")

    def post_json(self, url: str, body: dict | None, *, deadline: float | None = None, method: str = "POST") -> dict:
        """One attempt: send `body` as JSON (`method="GET"`: none) and return the JSON reply, within `deadline` and the
        reply cap. Raises [`HTTPRequestError`]."""
        import httpx

        shown = clean_url(url)
        timeout = self._timeout(deadline, shown)
        self._count("http_requests")
        try:
            with self.client.stream(method, url, json=body, headers=self.auth_headers(), timeout=timeout) as response:
                data = self._read(response, deadline, shown)
                status = response.status_code
        except httpx.TimeoutException as error:
            self._count("timeouts")
            limit = "the request deadline" if deadline is not None and time.monotonic() >= deadline - 0.01 else (
                f"{self.timeout_s:g} s")
            raise HTTPRequestError(f"{shown}: timed out after {limit} ({type(error).__name__})",
                                   retryable=True) from None
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as error:
            # RemoteProtocolError / ReadError: the server closed the connection (died mid-request).
            self._count("connect_errors")
            raise HTTPRequestError(f"{shown}: {type(error).__name__}: {error}", retryable=True, connect=True) from None
        except httpx.HTTPError as error:
            raise HTTPRequestError(f"{shown}: {type(error).__name__}: {error}", retryable=True) from None
        text = data.decode("utf-8", errors="replace")
        if status >= 400:
            retryable = status == 429 or status >= 500
            self._count("server_errors" if retryable else "client_errors")
            raise HTTPRequestError(f"{shown}: HTTP {status}: {scrub(text[:300])}", retryable=retryable, status=status,
                                   body=text[:1000])
        try:
            payload = json.loads(text)
        except ValueError:
            raise HTTPRequestError(f"{shown}: reply is not JSON: {scrub(text[:200])!r}", retryable=True) from None
        if not isinstance(payload, dict):
            raise HTTPRequestError(f"{shown}: reply is JSON but not an object: {scrub(text[:200])!r}", retryable=True)
        return payload

    def _timeout(self, deadline: float | None, shown: str):
        import httpx

        if deadline is None:
            return httpx.Timeout(self.timeout_s, connect=self.connect_timeout_s)
        left = deadline - time.monotonic()
        if left <= 0:
            raise HTTPRequestError(f"{shown}: request deadline exceeded before sending", retryable=False)
        return httpx.Timeout(min(self.timeout_s, left), connect=min(self.connect_timeout_s, left))

    def _read(self, response, deadline: float | None, shown: str) -> bytes:
        declared = response.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > self.max_reply_bytes:
            self._count("oversized_replies")
            raise HTTPRequestError(f"{shown}: reply of {int(declared)} bytes exceeds the cap of "
                                   f"{self.max_reply_bytes} bytes", retryable=False)
        # httpcore reads the read timeout from this dict before every read: re-arm it to the time left.
        timeouts = response.request.extensions.get("timeout")
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self.max_reply_bytes:
                self._count("oversized_replies")
                raise HTTPRequestError(f"{shown}: reply exceeds the cap of {self.max_reply_bytes} bytes",
                                       retryable=False)
            chunks.append(chunk)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._count("timeouts")
                    raise HTTPRequestError(f"{shown}: timed out after the request deadline (reply still arriving)",
                                           retryable=True)
                if isinstance(timeouts, dict):
                    timeouts["read"] = min(self.timeout_s, left)
        return b"".join(chunks)

    def _count(self, name: str) -> None:
        with self.lock:
            setattr(self.stats, name, getattr(self.stats, name) + 1)

    def backoff(self, attempt: int, deadline: float | None = None) -> None:
        """Sleep before retry number `attempt + 1`: `backoff_s * 2**attempt` with jitter, capped, never past
        `deadline`."""
        delay = min(self.backoff_s * (2**attempt), self.max_backoff_s) * (0.5 + random.random() / 2)
        if deadline is not None:
            delay = min(delay, max(deadline - time.monotonic(), 0.0))
        time.sleep(delay)

    def post_with_retries(self, url: str, body: dict, *, deadline: float | None = None) -> dict:
        """[`post_json`] with up to `max_retries` retries of retryable failures, all within `deadline` (default:
        now + `deadline_s`). Raises the last [`HTTPRequestError`]."""
        deadline = deadline if deadline is not None else self.new_deadline()
        attempt = 0
        while True:
            try:
                return self.post_json(url, body, deadline=deadline)
            except HTTPRequestError as error:
                out_of_time = deadline is not None and time.monotonic() >= deadline
                if not error.retryable or attempt >= self.max_retries or out_of_time:
                    if attempt:
                        raise HTTPRequestError(f"failed after {attempt + 1} attempts: {error}",
                                               retryable=error.retryable, connect=error.connect, status=error.status,
                                               body=error.body) from None
                    raise
            self._count("retries")
            self.backoff(attempt, deadline)
            attempt += 1

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.client.close()
