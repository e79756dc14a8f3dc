"""The multi-process tests' launcher helper: a hang fails the test and leaves no worker behind, also a worker that
sits in its own session (as launchers' workers may) and holds the output pipe."""

import os
import sys
import time

import pytest
from launching import run_or_fail


def test_a_hang_fails_and_kills_workers_in_their_own_sessions(tmp_path):
    pid_file = tmp_path / "worker.pid"
    launcher = (
        "import subprocess, sys, time\n"
        f"w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], start_new_session=True)\n"
        f"open({str(pid_file)!r}, 'w').write(str(w.pid))\n"
        "time.sleep(300)\n"
    )
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception, match="hung: still running after 3 s"):
        run_or_fail([sys.executable, "-c", launcher], dict(os.environ), timeout=3)
    assert time.monotonic() - started < 60
    worker = int(pid_file.read_text())
    time.sleep(0.5)
    with open(f"/proc/{worker}/stat") if os.path.exists(f"/proc/{worker}") else open(os.devnull) as f:
        state = f.read().rsplit(")", 1)[-1].split()[:1]
    assert state in ([], ["Z"])  # gone (or a zombie awaiting its reaper)
