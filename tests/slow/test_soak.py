"""The soak benchmark's short version (`benchmarks/soak.py`): a 20-step run per verifier (the trainer's own
transformers verifier, and verifier_mode="server" against a FAKE OpenAI-compatible server in a child process) stays
flat after warm-up within `benchmarks.soak.BOUNDS`: resident memory, open files, child processes, and the evidence
trail's bytes per step, with the verifier busy (called at least once a step on average, never idle for more than
`BOUNDS["idle_steps"]` steps in a row). The 500-step figures are in docs/reliability.md."""

import pytest

from benchmarks.soak import BOUNDS, flat, soak

STEPS, WARMUP = 20, 5


def test_flat_notices_growth():  # the check itself can fail
    rows = [{"rss_mib": 100.0 + 5 * k, "fds": 4 + k, "children": 0, "trail_bytes": 1000 * k, "verifier_calls": k}
            for k in range(20)]
    problems = flat(rows, WARMUP)["problems"]
    assert any("rss_mib" in p for p in problems) and any("fds" in p for p in problems)
    assert not any("idle" in p for p in problems)
    still = [{"rss_mib": 100.0, "fds": 4, "children": 1, "trail_bytes": 0, "verifier_calls": 3} for _ in range(20)]
    problems = flat(still, WARMUP)["problems"]
    assert any("did not grow" in p for p in problems)
    assert any("idle for 14 steps" in p for p in problems)  # a collapsed policy leaves the verifier nothing to do


@pytest.mark.slow
@pytest.mark.parametrize("verifier", ["transformers", "server"])
def test_a_run_stays_flat_after_warm_up(tiny_model_dir, tmp_path, verifier):
    # the client's connection pool grows with the largest burst of requests so far, up to verifier_max_concurrency
    # (64): capped at 8 here, it is full within the 5 warm-up steps and any later file is a leak
    samples = soak(verifier, STEPS, tiny_model_dir, str(tmp_path / "run"), verifier_max_concurrency=8)
    assert [s["step"] for s in samples] == list(range(STEPS + 1))  # one sample before the run, one per step
    verdict = flat(samples, WARMUP, BOUNDS)
    assert not verdict["problems"], verdict
    assert verdict["growth"]["verifier_calls_per_step"] >= 1  # the verifier was busy every step
    assert samples[-1]["children"] == (1 if verifier == "server" else 0)  # the fake server only
    assert len(list((tmp_path / "run" / "completions").glob("*.parquet"))) == 5  # rlce_completions_keep
