"""Run a multi-process command for a test: a hang becomes a test failure, and no worker outlives it."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest


def run_or_fail(cmd: list[str], env: dict, timeout: int, cwd=None) -> subprocess.CompletedProcess:
    """Run `cmd` in its own process group; past `timeout` seconds the whole group (launcher and workers) is killed
    and the test fails with the end of its output."""
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"hung: still running after {timeout} s (killed). End of its log:\n{stderr[-3000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
