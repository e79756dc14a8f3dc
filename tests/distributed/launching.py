"""Run a multi-process command for a test: a hang becomes a test failure, and no worker outlives it."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest


def descendants(root: int) -> list[int]:
    """The pids below `root` (from /proc): a launcher's workers may sit in their own process groups."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def run_or_fail(cmd: list[str], env: dict, timeout: int, cwd=None) -> subprocess.CompletedProcess:
    """Run `cmd`; past `timeout` seconds the launcher and every process below it are killed and the test fails with
    the end of its output."""
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for pid in [*descendants(proc.pid), proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        stdout, stderr = proc.communicate(timeout=60)
        pytest.fail(f"hung: still running after {timeout} s (killed). End of its log:\n{stderr[-3000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
