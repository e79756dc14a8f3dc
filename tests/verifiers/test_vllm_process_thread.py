"""A verifier server started (or restarted) from a thread that then ends keeps running.

The server child asks the kernel for SIGTERM when its parent dies (`prctl(PR_SET_PDEATHSIG)`); Linux ties that to the
*thread* that forked it, not the process. Before the fix a server started from a worker thread (a restart from a
reward thread, a test's watchdog) was terminated as soon as that thread returned: the server came up healthy and shut
down at once. Uses the FAKE vLLM server of `tests/fakes.py`."""

import sys
import threading
import time

from fakes import make_fake_vllm
from testing_utils import wait_gone

from rlce_trl.verifiers.vllm_process import VLLMServerProcess


def test_a_server_started_from_a_thread_outlives_the_thread(tmp_path):
    process = VLLMServerProcess("/nonexistent/model", python=sys.executable, env=make_fake_vllm(tmp_path / "fake"),
                                startup_timeout_s=30)
    thread = threading.Thread(target=process.start)
    thread.start()
    thread.join(timeout=60)
    try:
        assert process.is_alive()
        time.sleep(1.5)  # the thread is gone: before the fix the kernel's SIGTERM arrived here
        assert process.is_alive(), process.log_tail()
        pid = process.pid
    finally:
        process.stop()
    assert wait_gone([pid], 15)
