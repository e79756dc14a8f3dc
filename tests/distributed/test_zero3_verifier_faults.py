"""A verifier that hangs, errs, dies and comes back during a two-process DeepSpeed ZeRO-3 run (CPU, gloo).

The verifier is a REAL vllm-cpu server (the tiny chat model, head size 64) behind the test's fault-injecting proxy
(`tests/fault_proxy.py`): every 10th chat request is held past the client's read timeout, every 7th other one is
answered 503, and the test kills the server (SIGKILL, its whole process group) early in the run and starts it again
on the same port while the run goes on (the proxy answers 502 meanwhile). What must hold:

- every rank finishes all 20 steps, the same steps (ranks that entered scoring at different times would deadlock
  ZeRO-3's collectives), and no process outlives its deadline;
- the groups left unscored are counted (`rlce/unscored_fraction`, `rlce/verifier_failed_groups`), and a group the
  verifier failed is never rewarded as verified (its rewards are all None in the evidence trail);
- resuming from the last checkpoint continues at the next step with the same history.

The second test runs `verifier_mode="colocate"`: a real vllm-cpu server per rank, started by the trainer, one of which
dies for good; both ranks stop together with one line and a checkpoint, and a 2-rank resume continues from it.

Run with `pytest -m "slow and vllm" tests/distributed/test_zero3_verifier_faults.py` (about 3 minutes on 2 cores:
85 s and 80 s with other work running).
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fault_proxy import FaultProxy
from launching import descendants, finish, kill_tree
from testing_utils import (
    VLLM_PYTHON,
    build_servable_tiny_model,
    build_tiny_chat_model,
    free_port,
    vllm_env_available,
    wait_gone,
)

from rlce_trl.verifiers.vllm_process import VLLMServerProcess

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
STEPS = 20

pytestmark = [
    pytest.mark.slow,
    pytest.mark.vllm,
    pytest.mark.skipif(not vllm_env_available(), reason=f"no vllm-cpu venv at {VLLM_PYTHON} (make vllm-env)"),
]


def _env() -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1", TRANSFORMERS_VERBOSITY="error",
               PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), str(HERE.parent), env.get("PYTHONPATH")])))
    return env


def _launch(policy: str, out: Path, url: str, steps: int, resume: str | None = None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
           str(ROOT / "configs" / "accelerate" / "zero3.yaml"), "--num_processes", "2", "--mixed_precision", "no",
           "--main_process_port", str(free_port()), str(HERE / "zero3_faults_run.py"), policy, str(out), url,
           str(steps), *([resume] if resume else [])]
    return subprocess.Popen(cmd, env=_env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def test_verifier_hangs_errors_and_restart_under_zero3(tiny_model_dir, tmp_path):
    pytest.importorskip("deepspeed")
    server = VLLMServerProcess(
        build_tiny_chat_model(tmp_path / "verifier"), python=str(VLLM_PYTHON), max_model_len=1024,
        enforce_eager=True, dtype="float32", env={"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"},
        startup_timeout_s=300,
    ).start()
    proxy = FaultProxy(server.port, hang_every=10, error_every=7, hang_s=20).start()
    out = tmp_path / "run"
    chaos: dict = {}

    def kill_and_restart(proc: subprocess.Popen) -> None:
        # at the first chat request, so that the restart (about 50 s on a busy 2-core CPU) ends mid-run
        while proxy.counts["chat"] < 1 and proc.poll() is None:
            time.sleep(0.1)
        if proc.poll() is not None:
            return
        os.killpg(server.pid, signal.SIGKILL)  # the server and its engine core, mid-run
        chaos["killed_at_chat"] = proxy.counts["chat"]
        server.stop()  # reaps it
        proxy.wait_for("bad_gateway", 1, timeout_s=60)  # the run met the dead server
        server.start()  # same port, waits until healthy
        chaos["back_forwarded"] = proxy.counts["forwarded"]

    try:
        proc = _launch(tiny_model_dir, out, proxy.base_url, STEPS)
        thread = threading.Thread(target=kill_and_restart, args=(proc,), daemon=True)
        thread.start()
        stderr = finish(proc, timeout=420)[1]
        assert proc.returncode == 0, stderr[-4000:]
        thread.join(timeout=300)
        ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
        counts = dict(proxy.counts)

        # the faults happened: held and 503 requests, the kill, the 502s while it was down, and the server came back
        assert counts["hang"] >= 2 and counts["error"] >= 2 and counts["bad_gateway"] >= 1, counts
        assert counts["hang"] == counts["chat"] // 10  # every 10th chat request held past the client's deadline
        assert "killed_at_chat" in chaos and "back_forwarded" in chaos, chaos
        assert counts["forwarded"] > chaos["back_forwarded"], (counts, chaos)  # answered after the restart

        # every step on every rank, the same steps
        assert [r["finished"] for r in ranks] == [list(range(1, STEPS + 1))] * 2
        assert [r["steps"] for r in ranks] == [STEPS, STEPS]
        logs = [e for e in ranks[0]["log_history"] if "rlce/unscored_fraction" in e]
        assert [e["step"] for e in logs] == list(range(1, STEPS + 1))
        assert [e["rlce/unscored_fraction"] for e in logs] == [
            e["rlce/unscored_fraction"] for e in ranks[1]["log_history"] if "rlce/unscored_fraction" in e]

        # unscored groups are counted, and a group the verifier failed is never rewarded as verified
        trail = [g for g in map(json.loads, (out / "rlce_evidence.jsonl").read_text().splitlines()) if "status" in g]
        failed = [g for g in trail if g["status"] == "verifier_failed"]
        assert failed, "no group went unscored although the server was down for a while"
        assert all(all(r is None for r in g["rewards"]) for g in failed)
        assert all(g["status"] == "verified" or 1.0 not in g["rewards"] for g in trail)  # reward 1 only when verified
        assert sum(e["rlce/verifier_failed_groups"] for e in logs) == len(failed)
        by_step: dict[int, list] = {}
        for g in trail:
            by_step.setdefault(g["step"], []).append(all(r is None for r in g["rewards"]))
        assert {e["step"]: e["rlce/unscored_fraction"] for e in logs} == {
            s: sum(v) / len(v) for s, v in by_step.items()}
        assert sum(e["rlce/verifier_failed_requests"] for e in logs) > 0

        # resume from the last checkpoint: continues at step STEPS + 1 with the same history
        saved = json.loads((out / f"checkpoint-{STEPS}" / "trainer_state.json").read_text())
        proc = _launch(tiny_model_dir, out, proxy.base_url, STEPS + 1, str(out / f"checkpoint-{STEPS}"))
        stderr = finish(proc, timeout=240)[1]
        assert proc.returncode == 0, stderr[-4000:]
        resumed = [json.loads((out / f"rank{r}.resumed.json").read_text()) for r in (0, 1)]
        assert [(r["began_at"], r["finished"], r["steps"]) for r in resumed] == [(STEPS, [STEPS + 1], STEPS + 1)] * 2
        history = resumed[0]["log_history"]
        assert history[: len(saved["log_history"])] == saved["log_history"]
        assert [e["step"] for e in history[len(saved["log_history"]):] if "loss" in e] == [STEPS + 1]
    finally:
        proxy.stop()
        server.stop()


def _vllm_servers(root: int) -> list[int]:
    """The pids of the vLLM API servers the trainer's ranks started below `root`: each leads its own process group
    (`VLLMServerProcess` starts it in a session of its own), which its engine core and helpers join."""
    found = []
    for pid in descendants(root):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            leader = os.getpgid(pid) == pid
        except OSError:
            continue
        if leader and b"vllm.entrypoints.openai.api_server" in argv and b"-c" not in argv[:2]:  # not mid-exec
            found.append(pid)
    return found


def _launch_colocated(policy: Path, out: Path, python: Path, resume: str | None = None) -> subprocess.Popen:
    # each server's KV cache on CPU (GiB); its engine core in the API server's process: with the run script's
    # `--distributed-executor-backend uni`, one process per server instead of three, whose imports would make each
    # start-up about 40 % longer on 2 cores (the rehearsal, tests/slow/test_rehearsal.py, runs vLLM's default layout)
    env = {**_env(), "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
           str(ROOT / "configs" / "accelerate" / "zero3.yaml"), "--num_processes", "2", "--mixed_precision", "no",
           "--main_process_port", str(free_port()), str(HERE / "zero3_colocate_death_run.py"), str(policy), str(out),
           str(python), *([resume] if resume else [])]
    return subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def test_colocated_verifier_that_dies_ends_the_run_on_every_rank_and_resumes(tmp_path):
    """`verifier_mode="colocate"` with a REAL vllm-cpu engine per rank, started by the trainer (the tiny chat model,
    policy and frozen verifier). Once step 2 is scored, one rank's server is killed (SIGKILL, its process group) and
    cannot come back: its interpreter is gone (the test's wrapper script is removed), so the rank's restart fails
    at start-up. That rank's next scoring raises, the other rank learns it in the same gather, and both end with one
    `error:` line at the same step, no hang and no server left running, and save the checkpoint of the last finished
    step together (no periodic save is due: save_steps=100). With the wrapper back, a 2-rank resume from that
    checkpoint (new servers) continues at the next step with the same history."""
    pytest.importorskip("deepspeed")
    policy = build_servable_tiny_model(tmp_path / "policy")
    python = tmp_path / "vllm-python"  # the verifier's interpreter: removed to make the restart fail
    python.write_text(f'#!/bin/sh\nexec {VLLM_PYTHON} "$@"\n')
    python.chmod(0o755)
    out = tmp_path / "colocate"
    proc = _launch_colocated(policy, out, python)
    try:
        deadline = time.monotonic() + 420  # two vLLM start-ups on 2 busy cores, then two steps
        trail = out / "rlce_evidence.jsonl"
        while (not trail.exists() or '"step": 2,' not in trail.read_text()) and proc.poll() is None and (
                time.monotonic() < deadline):
            time.sleep(0.2)
        if proc.poll() is not None:
            pytest.fail(proc.communicate()[1][-4000:])
        if time.monotonic() >= deadline:
            pytest.fail("step 2 was not scored within 420 s")
        servers = _vllm_servers(proc.pid)
        assert len(servers) == 2, servers  # one real engine per rank
        python.unlink()  # a restart now fails at start-up
        os.killpg(servers[0], signal.SIGKILL)  # the server and its engine core
    except BaseException:
        kill_tree(proc.pid)
        raise
    stderr = finish(proc, timeout=240)[1]
    assert proc.returncode != 0, stderr[-4000:]
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert sorted(r["server_pid"] for r in ranks) == sorted(servers)
    assert ranks[0]["steps"] == ranks[1]["steps"] >= 2, ranks
    assert ranks[0]["finished"] == ranks[1]["finished"] == list(range(1, ranks[0]["steps"] + 1))
    assert all(r["line"] and r["line"].startswith("error: ") and "\n" not in r["line"] for r in ranks), ranks
    killed = next(r["rank"] for r in ranks if r["server_pid"] == servers[0])
    assert ranks[0]["line"] == ranks[1]["line"], ranks
    assert f"process {killed}: The vLLM verifier server died" in ranks[0]["line"], ranks[0]["line"]
    assert "could not be restarted" in ranks[0]["line"], ranks[0]["line"]
    assert wait_gone(servers, 30), "a verifier server outlived its rank"
    # the checkpoint of the last finished step, saved by every process together when the verifier failed
    step = ranks[0]["steps"]
    assert sorted(p.name for p in out.glob("checkpoint-*")) == [f"checkpoint-{step}"]
    saved = json.loads((out / f"checkpoint-{step}" / "trainer_state.json").read_text())
    assert saved["global_step"] == step
    assert len(list((out / f"checkpoint-{step}").glob("global_step*/*model_states.pt"))) >= 1  # ZeRO-3 shards

    # the verifier fixed (its interpreter back), the same launch resumes on 2 ranks with new servers
    python.write_text(f'#!/bin/sh\nexec {VLLM_PYTHON} "$@"\n')
    python.chmod(0o755)
    proc = _launch_colocated(policy, out, python, str(out / f"checkpoint-{step}"))
    stderr = finish(proc, timeout=300)[1]
    assert proc.returncode == 0, stderr[-4000:]
    resumed = [json.loads((out / f"rank{r}.resumed.json").read_text()) for r in (0, 1)]
    assert [(r["began_at"], r["finished"], r["steps"], r["line"]) for r in resumed] == [
        (step, [step + 1], step + 1, None)] * 2
    history = resumed[0]["log_history"]
    assert history[: len(saved["log_history"])] == saved["log_history"]
    assert [e["step"] for e in history[len(saved["log_history"]):] if "loss" in e] == [step + 1]
    assert wait_gone([r["server_pid"] for r in resumed], 30)
