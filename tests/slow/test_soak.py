"""The soak benchmark's short version (`benchmarks/soak.py`): a 20-step run per verifier (the trainer's own
transformers verifier, and verifier_mode="server" against a FAKE OpenAI-compatible server in a child process) stays
flat after warm-up within `benchmarks.soak.BOUNDS`: resident memory, open files, child processes, and the evidence
trail's bytes per step. The 500-step figures are in docs/reliability.md."""

import pytest

from benchmarks.soak import BOUNDS, flat, soak

STEPS, WARMUP = 20, 5


def test_flat_notices_growth():  # the check itself can fail
    rows = [{"rss_mib": 100.0 + 5 * k, "fds": 4 + k, "children": 0, "trail_bytes": 1000 * k} for k in range(20)]
    problems = flat(rows, WARMUP)["problems"]
    assert any("rss_mib" in p for p in problems) and any("fds" in p for p in problems)
    still = [{"rss_mib": 100.0, "fds": 4, "children": 1, "trail_bytes": 0} for _ in range(20)]
    assert any("did not grow" in p for p in flat(still, WARMUP)["problems"])


@pytest.mark.slow
@pytest.mark.parametrize("verifier", ["transformers", "server"])
def test_a_run_stays_flat_after_warm_up(tiny_model_dir, tmp_path, verifier):
    samples = soak(verifier, STEPS, tiny_model_dir, str(tmp_path / "run"))
    assert [s["step"] for s in samples] == list(range(STEPS + 1))  # one sample before the run, one per step
    verdict = flat(samples, WARMUP, BOUNDS)
    assert not verdict["problems"], verdict
    assert samples[-1]["children"] == (1 if verifier == "server" else 0)  # the fake server only
    assert len(list((tmp_path / "run" / "completions").glob("*.parquet"))) == 5  # rlce_completions_keep
