"""`Verifier.transport_metrics()`: the server backend's cumulative retry / timeout counters reach the trainer's logged
metrics through a wrapper (`CalibratedVerifier`) as they do without it."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

from fakes import ScriptedVerifier

from rlce_trl.trainer import RLCEGRPOTrainer
from rlce_trl.verifiers.base import Request, Sampling, VerifierStats
from rlce_trl.verifiers.calibrated import CalibratedVerifier, VerdictCalibration
from rlce_trl.verifiers.server import ServerVerifier

REQUEST = Request(messages=[{"role": "user", "content": "Claim: x"}], sampling=Sampling(max_tokens=4),
                  stage="validation", choices=("yes", "no", "unknown"))


def logged_metrics(verifier) -> dict:
    """What `RLCEGRPOTrainer._log_rlce_metrics` logs for a step that made no verifier call, with `verifier`."""
    owner = SimpleNamespace(verifier=verifier, _metrics={"train": defaultdict(list)}, method_name="rlce")
    RLCEGRPOTrainer._log_rlce_metrics(owner, "train", [], [VerifierStats()])
    return dict(owner._metrics["train"])


def test_wrappers_pass_the_server_counters_to_the_trainer(fake_server):
    fake_server.fail_next = 1  # one 503, retried
    server = ServerVerifier(fake_server.url, max_retries=2, backoff_s=0.01, max_concurrency=1)
    try:
        assert server.generate([REQUEST])[0].error is None
        expected = {"verifier_retries_total": 1.0, "verifier_timeouts_total": 0.0}
        assert server.transport_metrics() == expected
        wrapped = CalibratedVerifier(server, VerdictCalibration())
        assert wrapped.transport_metrics() == expected
        metrics = logged_metrics(wrapped)
        assert metrics["rlce/verifier_retries_total"] == [1.0] and metrics["rlce/verifier_timeouts_total"] == [0.0]
    finally:
        server.close()


def test_in_process_backends_log_no_transport_counters():
    metrics = logged_metrics(CalibratedVerifier(ScriptedVerifier(lambda request: "yes"), VerdictCalibration()))
    assert "rlce/verifier_calls" in metrics
    assert not [k for k in metrics if k.endswith("_total")]
