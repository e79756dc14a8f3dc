"""Lifecycle of the co-located verifier server process, with a FAKE `vllm` package (no real vLLM, fast): health
check at start, failure at start, stop on close / exit / SIGTERM / SIGKILL of the trainer (no orphans), death
detected mid-run with bounded restarts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from fakes import make_fake_vllm
from testing_utils import pid_alive, wait_gone

from rlce_trl.verifiers.base import Request
from rlce_trl.verifiers.colocate import ColocatedVLLMVerifier, device_for_local_rank
from rlce_trl.verifiers.server import VerifierUnavailableError
from rlce_trl.verifiers.vllm_process import VLLMServerProcess


@pytest.fixture
def fake_vllm_env(tmp_path):
    env = make_fake_vllm(tmp_path / "fake-vllm")
    env["FAKE_VLLM_PIDS"] = str(tmp_path / "pids.txt")
    return env


def _pids(env) -> list[int]:
    with open(env["FAKE_VLLM_PIDS"]) as f:
        return [int(p) for line in f for p in line.split()]


def _process(env, **kwargs) -> VLLMServerProcess:
    return VLLMServerProcess("/nonexistent/model", python=sys.executable, env=env, startup_timeout_s=20, **kwargs)


def test_command_line_carries_the_config():
    process = VLLMServerProcess("/ckpt", python=sys.executable, port=8123, gpu_memory_utilization=0.25,
                                max_model_len=4096, tensor_parallel_size=2, enforce_eager=True, dtype="bfloat16",
                                enable_sleep_mode=True, extra_args=["--max-num-batched-tokens", "4096"])
    cmd = process.command()
    joined = " ".join(cmd)
    assert cmd[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    for piece in ("--model /ckpt", "--port 8123", "--gpu-memory-utilization 0.25", "--max-model-len 4096",
                  "--tensor-parallel-size 2", "--enforce-eager", "--dtype bfloat16", "--enable-prefix-caching",
                  "--enable-sleep-mode", "--max-num-batched-tokens 4096", "--served-model-name rlce-verifier"):
        assert piece in joined
    assert process.base_url == "http://127.0.0.1:8123"
    assert process._child_env()["VLLM_SERVER_DEV_MODE"] == "1"


def test_child_env_drops_the_trainers_distributed_variables(monkeypatch):
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
        monkeypatch.setenv(key, "1")
    env = VLLMServerProcess("/ckpt", python=sys.executable, devices="3")._child_env()
    assert not {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"} & set(env)
    assert env["CUDA_VISIBLE_DEVICES"] == "3"


def test_device_for_local_rank(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert device_for_local_rank(2) == "2"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6")
    assert device_for_local_rank(1) == "5"


def test_start_health_and_stop_leave_no_process(fake_vllm_env):
    process = _process(fake_vllm_env).start()
    pids = _pids(fake_vllm_env)
    assert process.is_alive() and len(pids) == 2 and all(pid_alive(p) for p in pids)
    process.stop()
    process.stop()  # twice is fine
    assert wait_gone(pids, 5)


def test_exit_at_start_is_reported_with_the_log(fake_vllm_env):
    fake_vllm_env["FAKE_VLLM_EXIT_AT_START"] = "3"
    with pytest.raises(VerifierUnavailableError, match="exit code 3") as info:
        _process(fake_vllm_env).start()
    assert "failing at start-up on purpose" in str(info.value)


def test_never_healthy_times_out_and_is_stopped(fake_vllm_env):
    fake_vllm_env["FAKE_VLLM_NEVER_HEALTHY"] = "1"
    process = _process(fake_vllm_env)
    start = time.monotonic()
    with pytest.raises(VerifierUnavailableError, match="did not answer"):
        process.start(wait=False).wait_until_healthy(timeout_s=2)
    assert time.monotonic() - start < 15
    assert wait_gone(_pids(fake_vllm_env), 5)


PARENT = textwrap.dedent("""
    import json, sys, time
    from rlce_trl.verifiers.vllm_process import VLLMServerProcess
    env = json.loads(sys.argv[1])
    p = VLLMServerProcess("/nonexistent/model", python=sys.executable, env=env, startup_timeout_s=20).start()
    print("READY", flush=True)
    mode = sys.argv[2]
    if mode in ("exit", "error"):
        sys.stdin.readline()  # the test checks the server is up first, then tells us to end
    if mode == "exit":
        sys.exit(0)
    if mode == "error":
        raise RuntimeError("training crashed")
    time.sleep(60)
""")


@pytest.mark.parametrize("how", ["exit", "error", "SIGINT", "SIGTERM", "SIGKILL"])
def test_no_orphans_when_the_trainer_ends(fake_vllm_env, how):
    """The server dies with the process that started it: normal exit, exception, Ctrl-C, SIGTERM, even SIGKILL."""
    mode = how if how in ("exit", "error") else "wait"
    # Ctrl-C as a terminal delivers it: a shell that starts the tests in the background (`cmd &`, nohup) leaves SIGINT
    # ignored, and Python then installs no KeyboardInterrupt handler; the trainer under test must see the default.
    parent = subprocess.Popen([sys.executable, "-c", PARENT, json.dumps(fake_vllm_env), mode],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert parent.stdout.readline().strip() == "READY", parent.stderr.read()
        pids = _pids(fake_vllm_env)
        assert all(pid_alive(p) for p in pids)
        if mode == "wait":
            parent.send_signal(getattr(signal, how))
        else:
            parent.stdin.write("end\n")
            parent.stdin.flush()
        parent.wait(timeout=30)
        assert wait_gone(pids, 15), f"orphans left after {how}: {[p for p in pids if pid_alive(p)]}"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in (_pids(fake_vllm_env) if os.path.exists(fake_vllm_env["FAKE_VLLM_PIDS"]) else []):
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


def _request():
    return Request(messages=[{"role": "user", "content": "Is the sky blue?"}], choices=("yes", "no"))


def test_colocated_verifier_detects_death_and_restarts_within_budget(fake_vllm_env):
    verifier = ColocatedVLLMVerifier(_process(fake_vllm_env), max_restarts=1, timeout_s=5, connect_timeout_s=0.5,
                                     backoff_s=0.01, max_retries=1)
    try:
        assert verifier.model == "rlce-verifier"
        assert verifier.generate([_request()])[0].texts == ["yes"]
        first = verifier.process.pid
        os.killpg(first, signal.SIGKILL)  # the server dies between two steps
        verifier.process.proc.wait(timeout=10)
        assert verifier.generate([_request()])[0].texts == ["yes"]  # detected, restarted, answered
        assert verifier.restarts == 1 and verifier.process.pid != first
        os.killpg(verifier.process.pid, signal.SIGKILL)
        verifier.process.proc.wait(timeout=10)
        with pytest.raises(VerifierUnavailableError, match="already restarted 1"):
            verifier.generate([_request()])
    finally:
        verifier.close()
    assert wait_gone(_pids(fake_vllm_env), 5)


def test_colocated_verifier_close_stops_the_server(fake_vllm_env):
    with ColocatedVLLMVerifier(_process(fake_vllm_env)) as verifier:
        pid = verifier.process.pid
    assert wait_gone([pid] + _pids(fake_vllm_env), 5)
