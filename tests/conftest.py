"""Session-wide test set-up: offline Hub, and the fixtures more than one folder uses. Helpers are imported by name from
`testing_utils.py` (tiny models) and `fakes.py` (fakes); `pythonpath = ["tests"]` in pyproject.toml."""

import atexit
import ctypes
import gc
import os
import resource
import shutil
import tempfile
from pathlib import Path

import pytest
from fakes import FakeOpenAIServer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
# trackio reads its folder once, when first imported: the tests' projects (report_to trackio) never reach the user's.
if "TRACKIO_DIR" not in os.environ:
    os.environ["TRACKIO_DIR"] = tempfile.mkdtemp(prefix="rlce-tests-trackio-")
    atexit.register(shutil.rmtree, os.environ["TRACKIO_DIR"], True)
# Most tests train tiny random policies that never write an answer: the no-learning-signal stop is off for them by
# default; tests/health/test_no_signal.py turns it on (RLCEGRPOConfig.health_signal_patience).
os.environ.setdefault("RLCE_HEALTH_SIGNAL_PATIENCE", "0")


@pytest.fixture(autouse=True, scope="module")
def _release_memory_after_each_file():
    """One pytest process runs the whole suite: each file's models are collected, and glibc hands their pages back,
    before the next file (the process held ~13 GB by the end without this)."""
    yield
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


_PEAK_RISES: list[tuple[float, str]] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    before = _peak_gib()
    try:
        return (yield)
    finally:
        if (rise := _peak_gib() - before) >= 0.25:
            _PEAK_RISES.append((rise, item.nodeid))


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"peak resident memory of this pytest process: {_peak_gib():.2f} GiB; the tests that "
                                "raised it most: " + (", ".join(f"{node} +{rise:.2f} GiB" for rise, node in
                                                                 sorted(_PEAK_RISES, reverse=True)[:5]) or "none"))


@pytest.fixture
def real_prefeval() -> Path:
    """The real PrefEval checkout named by PREFEVAL_DIR (CC BY-NC: read in place, never copied); skips without one."""
    path = Path(os.environ.get("PREFEVAL_DIR", ""))
    if not os.environ.get("PREFEVAL_DIR") or not (path / "benchmark_dataset").is_dir():
        pytest.skip("no PrefEval checkout: set PREFEVAL_DIR to one (.ci/run does)")
    return path


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    from testing_utils import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def tiny_chat_model(tmp_path_factory) -> Path:
    from testing_utils import build_tiny_chat_model

    return build_tiny_chat_model(tmp_path_factory.mktemp("tiny-chat-model"))


@pytest.fixture
def fake_server_factory():
    """`make(script=None)`: start a FakeOpenAIServer (stopped at teardown); `script` writes the replies (judges)."""
    servers: list[FakeOpenAIServer] = []

    def make(script=None) -> FakeOpenAIServer:
        server = FakeOpenAIServer(script=script).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def fake_server(fake_server_factory):
    return fake_server_factory()


@pytest.fixture
def fake_judge(fake_server_factory):
    """`fake_judge(script)`: a FakeOpenAIServer whose replies `script(prompt_text, call_index)` writes (an int: that
    HTTP status)."""
    return fake_server_factory
