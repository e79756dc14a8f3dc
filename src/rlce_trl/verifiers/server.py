"""The frozen verifier behind one or several OpenAI-compatible servers (`vllm serve <checkpoint>`, any endpoint).

```
 evidence stage ── list[Request] ──► ServerVerifier.generate
                                       │ 1. sort by message text: requests sharing the sample context sit together
                                       │ 2. cut into prefix blocks, give each block to one URL (cache affinity,
                                       │    least-loaded first), so each server's prefix cache sees the whole group
                                       │ 3. send everything at once through a bounded thread pool (max_concurrency)
                                       ▼
      POST {url}/v1/chat/completions   (n, temperature, top_p, top_k, max_tokens, structured outputs)
                                       │ retries with exponential backoff on connect errors, timeouts, 429 and 5xx;
                                       │ a URL that refuses connections is marked down and its requests fail over;
                                       │ an overall deadline per request and a reply-size cap (openai_http.py)
                                       ▼
 list[Reply] in request order ◄── a request that still fails: Reply.failed(...) (the stage counts it as abstention)
```

Failure policy: one bad request never raises; `max_consecutive_failures` calls in a row in which no request succeeded
stop the run ([`VerifierUnavailableError`], naming the servers and the last error), and so does a health check at
construction, naming the URL and the command that starts a server. A server that rejects structured outputs is sent
none from then on (`structured_output="auto"`: the stage's tolerant parser reads free replies). The transport is the
package's one OpenAI-compatible client ([`~rlce_trl.verifiers.openai_http.OpenAIHTTPClient`]): synchronous and
thread-based (TRL may call reward code from its own asyncio loop); URLs appear in messages without credentials.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from ..credentials import clean_url
from ..data.media import openai_messages
from .base import Reply, Request, Verifier, VerifierUnavailableError, current_deadline
from .decisions import decide
from .openai_http import HTTPRequestError, OpenAIHTTPClient
from .routing import assign_urls, normalize_base_url, prefix_blocks  # noqa: F401  (prefix_blocks: public here)

logger = logging.getLogger(__name__)

START_SERVER_HINT = (
    "Start one with `python -m vllm.entrypoints.openai.api_server --model <initial checkpoint> --port 8000` "
    "(or `vllm serve <initial checkpoint>`), pass its URL as verifier_server_base_url, or use "
    "verifier_mode='colocate' to let the trainer start it."
)


class ServerVerifier(Verifier):
    """Frozen verifier behind OpenAI-compatible chat-completions servers (vLLM's first of all).

    Args:
        base_urls: one URL or several (a list, or a comma-separated string), e.g. `"http://127.0.0.1:8000"`. A
            trailing `/v1` is accepted.
        model: the served model name; `None` asks the first server's `/v1/models`.
        max_concurrency: requests in flight at once, over all servers.
        timeout_s, connect_timeout_s, backoff_s, max_backoff_s, max_reply_bytes, api_key_env: the transport's
            ([`~rlce_trl.verifiers.openai_http.OpenAIHTTPClient`]); a reply over `max_reply_bytes` fails its request.
        max_retries: retries of one request after a connect error, timeout, 429 or 5xx (so `max_retries + 1`
            attempts at most).
        max_consecutive_failures: failed calls (no request of the call succeeded) in a row before
            [`VerifierUnavailableError`]; `0` never raises.
        max_outage_s: and the outage (since the first of those failed calls) has lasted at least this long, seconds:
            a server that is restarted within it (its groups unscored meanwhile) does not stop the run. `0`: the
            count alone decides.
        call_timeout_s: deadline of one whole `generate` call; requests not answered by then fail. `None`: only the
            per-request bounds apply.
        request_deadline_s: overall deadline of one request, every attempt, backoff and read included (a server that
            trickles bytes cannot hold it longer); `None`: at most `(max_retries + 1) * timeout_s` per read.
        structured_output: `"auto"` (vLLM's `structured_outputs`, dropped after a 400 about it), `"structured_outputs"`
            (always), `"guided"` (vLLM <= 0.10 `guided_choice` / `guided_json`), `"none"`.
        health_wait_s: how long the health check at construction (every URL; fails fast) waits for servers that are
            still starting.
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
        max_outage_s: float = 0.0,
        call_timeout_s: float | None = None,
        request_deadline_s: float | None = 900.0,
        max_reply_bytes: int = 16_000_000,
        api_key_env: str | None = "RLCE_VERIFIER_API_KEY",
        structured_output: str = "auto",
        health_wait_s: float = 0.0,
        one_token_decisions: bool = True,
    ) -> None:
        super().__init__()
        if isinstance(base_urls, str):
            base_urls = [u for u in base_urls.split(",") if u.strip()]
        self.base_urls = [normalize_base_url(u) for u in base_urls]
        if not self.base_urls:
            raise ValueError("ServerVerifier needs at least one base URL.")
        if structured_output not in ("auto", "structured_outputs", "guided", "none"):
            raise ValueError(f"structured_output={structured_output!r}: use auto, structured_outputs, guided or none.")
        if max_concurrency < 1 or max_retries < 0 or timeout_s <= 0 or backoff_s < 0:
            raise ValueError("max_concurrency >= 1, max_retries >= 0, timeout_s > 0 and backoff_s >= 0 are required.")
        self.model = model
        self._probe_timeout = max(connect_timeout_s, 2.0)
        self.max_consecutive_failures = max_consecutive_failures
        self.max_outage_s = max_outage_s
        self._outage_since: float | None = None  # monotonic time of the first failed call in a row
        self.call_timeout_s = call_timeout_s
        self.structured_output = structured_output
        self.one_token_decisions = one_token_decisions
        self.supports_structured_output = structured_output != "none"
        self.consecutive_failed_calls = 0
        self.last_error: str | None = None
        self._down: set[str] = set()
        self._inflight = {u: 0 for u in self.base_urls}
        self._lock = threading.Lock()
        self._closed = False
        self.http = OpenAIHTTPClient(
            timeout_s=timeout_s, connect_timeout_s=connect_timeout_s, deadline_s=request_deadline_s,
            max_reply_bytes=max_reply_bytes, max_retries=max_retries, backoff_s=backoff_s,
            max_backoff_s=max_backoff_s, api_key_env=api_key_env, max_connections=max_concurrency,
        )
        self.server_stats = self.http.stats  # transport counters (the per-stage work is in `Verifier.stats`)
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="rlce-verifier")
        try:
            self.health_check(wait_s=health_wait_s)
            if self.model is None:
                self.model = self._discover_model()
        except BaseException:
            self.close()
            raise

    def _probe(self, url: str) -> str | None:
        """`None` when `url` answers `/health` (vLLM) or `/v1/models` (any OpenAI-compatible server), else why not."""
        status = self.http.get_status(f"{url}/health", self._probe_timeout)
        if status == 200:
            return None
        if isinstance(status, str):
            return status
        status = self.http.get_status(f"{url}/v1/models", self._probe_timeout)
        return None if status == 200 else status if isinstance(status, str) else (
            f"HTTP {status} from /health and /v1/models")

    def health_check(self, wait_s: float = 0.0) -> None:
        """Raise [`VerifierUnavailableError`] unless every URL answers within `wait_s` seconds (one probe if 0)."""
        deadline = time.monotonic() + max(wait_s, 0.0)
        reasons = dict.fromkeys(self.base_urls, "")
        while True:
            probed = {url: self._probe(url) for url in reasons}
            with self._lock:
                self._down -= {url for url, reason in probed.items() if reason is None}
            reasons = {url: reason for url, reason in probed.items() if reason is not None}
            if not reasons or time.monotonic() >= deadline:
                break
            time.sleep(min(1.0, max(deadline - time.monotonic(), 0.0)))
        if reasons:
            lines = "\n".join(f"  {clean_url(url)}: {reason}" for url, reason in reasons.items())
            waited = f" after waiting {wait_s:.0f} s" if wait_s > 0 else ""
            raise VerifierUnavailableError(
                f"The verifier server is not reachable{waited}:\n{lines}\n{START_SERVER_HINT}"
            )

    def _discover_model(self) -> str:
        url = self.base_urls[0]
        shown = clean_url(url)
        try:
            data = self.http.post_json(f"{url}/v1/models", None, deadline=time.monotonic() + self._probe_timeout,
                                       method="GET").get("data")
            models = [m["id"] for m in data or []]
        except (HTTPRequestError, KeyError, TypeError) as error:
            raise VerifierUnavailableError(
                f"Could not list the models served at {shown}/v1/models ({error}); pass the served model name "
                f"explicitly (verifier_server_model)."
            ) from None
        if not models:
            raise VerifierUnavailableError(f"{shown}/v1/models lists no model; pass verifier_server_model.")
        if len(models) > 1:
            logger.warning("%s serves %s; using %s as the verifier.", shown, models, models[0])
        return models[0]

    def _payload(self, request: Request, structured: bool) -> dict:
        s = request.sampling
        body: dict = {
            "model": self.model,
            "messages": openai_messages(request.messages, request.media),  # clips as image_url parts
            "n": s.n,
            "max_tokens": s.max_tokens,
            "temperature": 0.0 if s.greedy else s.temperature,
        }
        if not s.greedy:
            body["top_p"] = s.top_p
            if s.top_k:
                body["top_k"] = s.top_k  # a vLLM extra parameter
        body.update(getattr(request, "payload_extra", None) or {})  # one-token decisions (decisions.py)
        if structured and (request.choices or request.json_schema is not None):
            if self.structured_output == "guided" and request.choices:
                body["guided_choice"] = list(request.choices)
            elif self.structured_output == "guided":
                body["guided_json"] = request.json_schema
            elif request.choices:
                body["structured_outputs"] = {"choice": list(request.choices)}
            else:
                # no free whitespace (vLLM 0.31 takes it per server only, as `VLLMServerProcess.command` does)
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
        missing = n - len(texts)
        if missing:
            return Reply(texts + [""] * missing, reasons + ["error"] * missing, num_tokens,
                         error=f"server returned {len(texts)} of {n} choices")
        return Reply(texts, reasons, num_tokens, choice_logprobs=logprobs)

    def _pick_url(self, preferred: str, tried: set[str]) -> str | None:
        with self._lock:
            live = [u for u in self.base_urls if u not in self._down]
            if preferred in live and preferred not in tried:
                return preferred
            fresh = [u for u in live if u not in tried] or live
            return min(fresh, key=lambda u: self._inflight[u], default=None)

    def _post(self, url: str, body: dict, deadline: float | None) -> dict:
        with self._lock:
            self._inflight[url] += 1
        try:
            return self.http.post_json(f"{url}/v1/chat/completions", body, deadline=deadline)
        finally:
            with self._lock:
                self._inflight[url] -= 1

    def _one(self, request: Request, preferred: str, call_deadline: float | None = None) -> Reply:
        n = request.sampling.n
        tried: set[str] = set()
        last = "no attempt"
        attempt = 0
        deadline = min((d for d in (call_deadline, self.http.new_deadline()) if d is not None), default=None)
        while attempt <= self.http.max_retries:
            if self._closed:
                return Reply.failed(n, "verifier closed")
            if deadline is not None and time.monotonic() >= deadline:
                which = "call" if deadline == call_deadline else "request"
                return Reply.failed(n, f"{which} deadline exceeded; last error: {last}")
            url = self._pick_url(preferred, tried)
            if url is None:
                return Reply.failed(n, f"all verifier servers are down; last error: {last}")
            tried.add(url)
            try:
                body = self._payload(request, self.structured_output != "none")
                return self._parse(self._post(url, body, deadline), n)
            except HTTPRequestError as error:
                if not error.retryable:
                    if self._drop_structured(error):
                        continue  # same attempt count: this was a capability probe, not a failure
                    return Reply.failed(n, str(error))
                last = str(error)
                if error.connect and self._probe(url) is not None:
                    self._mark_down(url, last)
                attempt += 1
                if attempt <= self.http.max_retries:
                    with self._lock:
                        self.server_stats.retries += 1
                    if not (error.connect and self._pick_url(preferred, tried) not in (None, url)):
                        self.http.backoff(attempt - 1, deadline)  # else fail over to another live URL at once
        return Reply.failed(n, f"failed after {self.http.max_retries + 1} attempts: {last}")

    def _drop_structured(self, error: HTTPRequestError) -> bool:
        """Whether `error` is a server's rejection of structured outputs under `"auto"`: then they are sent no more."""
        body = error.body.lower()
        if self.structured_output != "auto" or error.status not in (400, 422) or not any(
                word in body for word in ("structured_outputs", "structured outputs", "guided", "extra_forbidden",
                                          "extra inputs are not permitted", "unrecognized")):
            return False
        with self._lock:
            if self.structured_output == "none":
                return True
            self.structured_output = "none"
            self.supports_structured_output = False
            self.server_stats.structured_output_fallbacks += 1
        logger.warning("The verifier server rejected structured outputs (%s); continuing without them.", error)
        return True

    def _mark_down(self, url: str, reason: str) -> None:
        with self._lock:
            if url not in self._down:
                logger.warning("Verifier server %s marked down: %s", clean_url(url), reason)
            self._down.add(url)

    def _revive(self) -> None:
        with self._lock:
            down = list(self._down)
        for url in down:
            if self._probe(url) is None:
                with self._lock:
                    self._down.discard(url)
                logger.warning("Verifier server %s is back.", clean_url(url))

    def _generate(self, requests: list[Request]) -> list[Reply]:
        if self.one_token_decisions and self.structured_output != "none":
            return decide(requests, self._send)  # closed greedy requests: one generated token per decision
        return self._send(requests)

    def _send(self, requests: list[Request]) -> list[Reply]:
        if self._closed:
            raise RuntimeError("ServerVerifier.generate called after close().")
        self._before_call()
        self._revive()
        order, urls = assign_urls(requests, self.base_urls)
        # The call's deadline: call_timeout_s, and an outer one the caller set (`base.deadline`: the reward object's
        # per-group deadline); passed to each request, so concurrent calls from several threads keep their own.
        own = time.monotonic() + self.call_timeout_s if self.call_timeout_s else None
        deadline = min((d for d in (own, current_deadline()) if d is not None), default=None)
        futures = {i: self._pool.submit(self._one, requests[i], urls[i], deadline) for i in order}
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
            self.consecutive_failed_calls, self._outage_since = 0, None
            return
        self.consecutive_failed_calls += 1
        if self._outage_since is None:
            self._outage_since = time.monotonic()
        outage = time.monotonic() - self._outage_since
        self.last_error = next((r.error for r in replies if r.error), None)
        logger.warning(
            "Verifier call failed entirely (%d in a row, budget %d): %s",
            self.consecutive_failed_calls, self.max_consecutive_failures, self.last_error,
        )
        if (self.max_consecutive_failures and self.consecutive_failed_calls >= self.max_consecutive_failures
                and outage >= self.max_outage_s):
            raise VerifierUnavailableError(
                f"The verifier failed on {self.consecutive_failed_calls} calls in a row over {outage:.0f} s (budget "
                f"verifier_max_consecutive_failures={self.max_consecutive_failures}, verifier_max_outage="
                f"{self.max_outage_s:g}); servers: "
                f"{', '.join(map(clean_url, self.base_urls))}; last error: {self.last_error}"
            )

    def transport_metrics(self) -> dict[str, float]:
        stats = self.server_stats
        return {"verifier_retries_total": float(stats.retries), "verifier_timeouts_total": float(stats.timeouts)}

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
