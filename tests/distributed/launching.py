"""Run a multi-process command for a test: a hang becomes a test failure, and no worker outlives it. `kill_tree` is
shared with `tools/gpu_check.py` (run from the repository root, where `tests` is importable; no pytest needed)."""

from __future__ import annotations

import os
import signal
import subprocess


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


def kill_tree(root: int) -> None:
    """SIGKILL `root` and every process below it (workers that hold its pipes included)."""
    for pid in [*descendants(root), root]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def finish(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """Wait for `proc` (started with `start_new_session=True` and text pipes) and return its (stdout, stderr); past
    `timeout` seconds it and every process below it are killed and the test fails with the end of its log."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        _, stderr = proc.communicate(timeout=60)
        import pytest

        pytest.fail(f"hung: still running after {timeout} s (killed). End of its log:\n{stderr[-3000:]}")


def run_or_fail(cmd: list[str], env: dict, timeout: int, cwd=None) -> subprocess.CompletedProcess:
    """Run `cmd`; past `timeout` seconds the launcher and every process below it are killed and the test fails with
    the end of its output (`finish`)."""
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    stdout, stderr = finish(proc, timeout)
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def leave(trainer=None) -> None:
    """End a launched rank once its results are on disk: the product's end of a launch (`end_run`: every rank waits,
    then the trackers finish and the process group is destroyed), then exit without the interpreter's teardown, where
    gloo's worker threads can still be joined by static destructors and abort a finished process ("terminate called
    without an active exception", SIGABRT) once in a while on a loaded machine: torch's exit, not what tests check."""
    import sys

    if trainer is not None:
        from rlce_trl.training.pipeline import end_run

        end_run(trainer)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
