"""ServerVerifier against a FAKE OpenAI-compatible server on 127.0.0.1 (fast, no vLLM): the request format, ordering,
spreading across URLs, and the faults of issue 3 (down at start, killed mid-run, slow replies, 5xx)."""

from __future__ import annotations

import threading
import time

import pytest
from fakes import FakeOpenAIServer
from testing_utils import free_port

from rlce_trl.verifiers.base import Request, Sampling, current_deadline, deadline
from rlce_trl.verifiers.server import ServerVerifier, VerifierUnavailableError, prefix_blocks


def _requests(contexts=("ctx-A", "ctx-B"), per_context=3, n=1, **kwargs):
    out = []
    for k in range(per_context):
        for context in contexts:
            out.append(Request(
                messages=[{"role": "system", "content": "verifier"},
                          {"role": "user", "content": f"### Input\n{context} " * 20 + f"\n### Task\nq{k}"}],
                sampling=Sampling(temperature=1.0, top_p=0.95, top_k=20, max_tokens=16, n=n),
                stage="validation", **kwargs,
            ))
    return out


def _fast(urls, **kwargs):
    defaults = {"timeout_s": 2.0, "connect_timeout_s": 0.5, "max_retries": 2, "backoff_s": 0.01,
                "max_backoff_s": 0.05, "max_concurrency": 8}
    defaults.update(kwargs)
    return ServerVerifier(urls, **defaults)


def test_happy_path_payload_order_and_model_discovery(fake_server):
    with _fast(fake_server.url) as verifier:
        assert verifier.model == "fake-verifier"
        requests = _requests(n=2)
        replies = verifier.generate(requests)
    assert len(replies) == len(requests)
    for request, reply in zip(requests, replies, strict=True):
        assert reply.error is None and len(reply.texts) == 2 and reply.finish_reasons == ["stop", "stop"]
        assert request.messages[-1]["content"][-40:] in reply.texts[0]  # replies come back in request order
        assert reply.num_tokens == 6
    body = fake_server.bodies[0]
    assert body["n"] == 2 and body["temperature"] == 1.0 and body["top_p"] == 0.95 and body["top_k"] == 20
    assert body["max_tokens"] == 16 and body["model"] == "fake-verifier"
    assert verifier.stats.requests == len(requests) and verifier.stats.failed_requests == 0


def test_greedy_sends_no_sampling_extras_and_structured_outputs(fake_server):
    with _fast(fake_server.url) as verifier:
        choice = Request(messages=[{"role": "user", "content": "x"}], choices=("yes", "no", "unknown"))
        schema = {"type": "object", "properties": {"P1": {"enum": ["same", "different"]}}}
        as_json = Request(messages=[{"role": "user", "content": "y"}], json_schema=schema)
        replies = verifier.generate([choice, as_json])
    assert replies[0].texts == ["yes"]
    bodies = sorted(fake_server.bodies, key=lambda b: b["messages"][0]["content"])
    assert bodies[0]["structured_outputs"] == {"choice": ["yes", "no", "unknown"]}
    assert bodies[1]["structured_outputs"] == {"json": schema, "disable_any_whitespace": True}
    assert bodies[0]["temperature"] == 0.0 and "top_p" not in bodies[0] and "top_k" not in bodies[0]


def test_structured_output_rejected_falls_back_to_free_text(fake_server):
    fake_server.reject_structured = True
    with _fast(fake_server.url) as verifier:
        replies = verifier.generate([Request(messages=[{"role": "user", "content": "x"}], choices=("yes", "no"))])
        assert replies[0].error is None and replies[0].texts[0].startswith("echo")
        assert verifier.supports_structured_output is False
        assert verifier.server_stats.structured_output_fallbacks == 1


def test_guided_mode_uses_old_vllm_field_names(fake_server):
    with _fast(fake_server.url, structured_output="guided") as verifier:
        verifier.generate([Request(messages=[{"role": "user", "content": "x"}], choices=("yes", "no"))])
    assert fake_server.bodies[0]["guided_choice"] == ["yes", "no"]
    assert "structured_outputs" not in fake_server.bodies[0]


def test_requests_sharing_a_prefix_are_sent_together():
    keys = ["sys|ctx-B|q0", "sys|ctx-A|q0", "sys|ctx-B|q1", "sys|ctx-A|q1", "other"]
    order = sorted(range(len(keys)), key=lambda i: keys[i])
    assert [keys[i] for i in order] == ["other", "sys|ctx-A|q0", "sys|ctx-A|q1", "sys|ctx-B|q0", "sys|ctx-B|q1"]
    blocks = prefix_blocks(keys, order, min_shared=0.7)
    assert [[keys[i] for i in b] for b in blocks] == [["other"], ["sys|ctx-A|q0", "sys|ctx-A|q1"],
                                                       ["sys|ctx-B|q0", "sys|ctx-B|q1"]]


def test_groups_are_spread_across_urls_with_prefix_affinity(fake_server_factory):
    a, b = fake_server_factory(), fake_server_factory()
    with _fast([a.url, b.url + "/v1"]) as verifier:
        replies = verifier.generate(_requests(contexts=("ctx-A", "ctx-B", "ctx-C", "ctx-D"), per_context=3))
    assert all(r.error is None for r in replies)
    assert a.bodies and b.bodies  # both servers worked

    def contexts(server):
        return {body["messages"][1]["content"][10:15] for body in server.bodies}

    # every context went to exactly one server, so that server's prefix cache sees the whole group
    assert contexts(a) | contexts(b) == {"ctx-A", "ctx-B", "ctx-C", "ctx-D"} and not contexts(a) & contexts(b)


def test_server_down_at_start_fails_fast_with_clear_message():
    url = f"http://127.0.0.1:{free_port()}"
    start = time.monotonic()
    with pytest.raises(VerifierUnavailableError) as info:
        _fast(url)
    assert time.monotonic() - start < 5
    message = str(info.value)
    assert url in message and "vllm.entrypoints.openai.api_server" in message


def test_health_wait_covers_a_server_that_is_starting():
    port = free_port()
    server = FakeOpenAIServer(port)


    timer = threading.Timer(0.5, server.start)
    timer.start()
    try:
        with _fast(f"http://127.0.0.1:{port}", health_wait_s=10) as verifier:
            assert verifier.generate(_requests(per_context=1))[0].error is None
    finally:
        timer.join()
        server.stop()


def test_5xx_then_success_is_retried(fake_server):
    fake_server.fail_next = 2
    with _fast(fake_server.url, max_concurrency=1) as verifier:
        replies = verifier.generate(_requests(contexts=("ctx-A",), per_context=1))
        assert replies[0].error is None
        assert verifier.server_stats.server_errors == 2 and verifier.server_stats.retries == 2


def test_persistent_5xx_gives_failed_replies_then_budget_error(fake_server):
    fake_server.fail_next = 10_000
    with _fast(fake_server.url, max_retries=1, max_consecutive_failures=2) as verifier:
        replies = verifier.generate(_requests(per_context=1))
        assert all(r.error and "HTTP 503" in r.error and r.finish_reasons == ["error"] for r in replies)
        assert verifier.stats.failed_requests == 2 and verifier.consecutive_failed_calls == 1
        with pytest.raises(VerifierUnavailableError, match="2 calls in a row"):
            verifier.generate(_requests(per_context=1))


def test_a_success_resets_the_failure_budget(fake_server):
    with _fast(fake_server.url, max_retries=0, max_consecutive_failures=2) as verifier:
        fake_server.fail_next = 2
        assert all(r.error for r in verifier.generate(_requests(per_context=1)))
        assert all(r.error is None for r in verifier.generate(_requests(per_context=1)))
        fake_server.fail_next = 2
        assert all(r.error for r in verifier.generate(_requests(per_context=1)))  # 1 in a row again: no raise
        assert verifier.consecutive_failed_calls == 1


def test_replies_slower_than_the_timeout_fail_within_bounded_time(fake_server):
    fake_server.delay_s = 1.5
    with _fast(fake_server.url, timeout_s=0.3, max_retries=1) as verifier:
        start = time.monotonic()
        replies = verifier.generate(_requests(per_context=2))
        elapsed = time.monotonic() - start
        assert all(r.error and "timed out" in r.error for r in replies)
        assert elapsed < 3.0  # 2 attempts x 0.3 s + backoff, concurrently
        assert verifier.server_stats.timeouts == 2 * len(replies)
        fake_server.delay_s = 0.0
        assert all(r.error is None for r in verifier.generate(_requests(per_context=1)))


def test_call_deadline_bounds_a_whole_batch(fake_server):
    fake_server.delay_s = 0.5
    with _fast(fake_server.url, timeout_s=5.0, max_concurrency=1, call_timeout_s=1.2) as verifier:
        start = time.monotonic()
        replies = verifier.generate(_requests(per_context=5))  # 10 requests, one at a time, 0.5 s each
        assert time.monotonic() - start < 3.0
        assert sum(r.error is None for r in replies) >= 1  # what finished in time is kept (>= 2 on a free machine)
        assert any(r.error and "deadline" in r.error for r in replies)


def test_nested_deadlines_keep_the_earliest():
    with deadline(10.0):
        with deadline(None):
            assert current_deadline() == 10.0
        with deadline(20.0):
            assert current_deadline() == 10.0
        with deadline(5.0):
            assert current_deadline() == 5.0
        assert current_deadline() == 10.0
    assert current_deadline() is None


def test_server_killed_mid_run_then_back(fake_server):
    with _fast(fake_server.url, max_consecutive_failures=3) as verifier:
        assert all(r.error is None for r in verifier.generate(_requests()))
        port = fake_server.port
        fake_server.stop()
        start = time.monotonic()
        replies = verifier.generate(_requests())
        assert time.monotonic() - start < 5  # marked down at the first refusal, the rest fail fast
        assert all(r.error for r in replies) and verifier.consecutive_failed_calls == 1
        # the server comes back on the same port: the next call probes it and uses it again
        revived = FakeOpenAIServer(port).start()
        try:
            assert all(r.error is None for r in verifier.generate(_requests()))
            assert verifier.consecutive_failed_calls == 0
        finally:
            revived.stop()


def test_server_killed_for_good_stops_the_run_after_the_budget(fake_server):
    with _fast(fake_server.url, max_consecutive_failures=3) as verifier:
        verifier.generate(_requests(per_context=1))
        fake_server.stop()
        for _ in range(2):
            assert all(r.error for r in verifier.generate(_requests(per_context=1)))
        with pytest.raises(VerifierUnavailableError, match=fake_server.url):
            verifier.generate(_requests(per_context=1))


def test_an_outage_shorter_than_max_outage_does_not_stop_the_run(fake_server):
    """A restart takes longer than a few failed calls: with `max_outage_s` the budget needs both the count and the
    time, so the calls of a short outage fail (their groups unscored) without an error, and a long one still stops."""
    fake_server.fail_next = 10_000
    with _fast(fake_server.url, max_retries=0, max_consecutive_failures=2, max_outage_s=1.0) as verifier:
        for _ in range(4):  # past the count, within the time
            assert all(r.error for r in verifier.generate(_requests(per_context=1)))
        assert verifier.consecutive_failed_calls == 4
        time.sleep(1.1)
        with pytest.raises(VerifierUnavailableError, match="verifier_max_outage=1"):
            verifier.generate(_requests(per_context=1))
        fake_server.fail_next = 0  # a success resets the outage's start too
        assert all(r.error is None for r in verifier.generate(_requests(per_context=1)))
        assert verifier.consecutive_failed_calls == 0 and verifier._outage_since is None


def test_one_of_two_servers_dies_and_its_requests_fail_over(fake_server_factory):
    a, b = fake_server_factory(), fake_server_factory()
    with _fast([a.url, b.url]) as verifier:
        a.stop()
        replies = verifier.generate(_requests(contexts=("ctx-A", "ctx-B", "ctx-C", "ctx-D")))
        assert all(r.error is None for r in replies)
        assert len(b.bodies) == len(replies)


def test_a_4xx_is_not_retried(fake_server):
    fake_server.fail_next, fake_server.fail_status = 1, 400
    with _fast(fake_server.url, max_concurrency=1) as verifier:
        replies = verifier.generate(_requests(contexts=("ctx-A",), per_context=1))
        assert replies[0].error and "HTTP 400" in replies[0].error and verifier.server_stats.retries == 0


def test_api_key_from_the_environment(fake_server, monkeypatch):
    monkeypatch.setenv("MY_VERIFIER_KEY", "secret-token")
    with _fast(fake_server.url, api_key_env="MY_VERIFIER_KEY") as verifier:
        assert verifier.http.auth_headers() == {"Authorization": "Bearer secret-token"}  # read per request
        assert "secret-token" not in repr(verifier.http)


def test_close_is_idempotent(fake_server):
    verifier = _fast(fake_server.url)
    verifier.close()
    verifier.close()


# ---------------------------------------------------------------------------------------- issue 13: hostile servers


def test_a_server_trickling_bytes_is_cut_at_the_request_deadline(fake_server):
    fake_server.trickle_s = 0.3  # each byte well inside the 2 s read timeout: only the overall deadline can stop it
    with _fast(fake_server.url, max_retries=0, request_deadline_s=1.0, max_consecutive_failures=0) as verifier:
        start = time.monotonic()
        [reply] = verifier.generate(_requests(contexts=("ctx-A",), per_context=1))
        elapsed = time.monotonic() - start
    assert reply.error and "deadline" in reply.error
    assert elapsed < 2.0


def test_an_oversized_reply_is_refused_not_read_whole(fake_server):
    fake_server.padding_bytes = 200_000
    with _fast(fake_server.url, max_reply_bytes=50_000, max_consecutive_failures=0) as verifier:
        [reply] = verifier.generate(_requests(contexts=("ctx-A",), per_context=1))
        assert reply.error and "exceeds the cap of 50000 bytes" in reply.error
        assert verifier.server_stats.oversized_replies == 1 and verifier.server_stats.retries == 0


def test_credentials_in_the_url_never_reach_messages_or_warnings(fake_server, caplog):
    url = fake_server.url.replace("http://", "http://user:hunter2secret@") + "/v1"
    fake_server.fail_next = 10_000
    with caplog.at_level("WARNING"), _fast(url, max_retries=0, max_consecutive_failures=1) as verifier:
        with pytest.raises(VerifierUnavailableError) as info:
            verifier.generate(_requests(per_context=1))
    texts = [str(info.value)] + [r.getMessage() for r in caplog.records]
    assert any("HTTP 503" in t for t in texts)
    assert not any("hunter2secret" in t for t in texts)


def test_a_down_credentialed_url_is_named_without_its_password():
    url = f"http://admin:hunter2secret@127.0.0.1:{free_port()}"
    with pytest.raises(VerifierUnavailableError) as info:
        _fast(url)
    assert "127.0.0.1" in str(info.value) and "hunter2secret" not in str(info.value)
