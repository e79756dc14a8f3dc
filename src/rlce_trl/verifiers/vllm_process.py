"""The vLLM server child process behind `verifier_mode="colocate"` (and the vLLM tests): start it, wait for
`/health`, stop it with its whole process group, leave no orphan.

Lifecycle: the child runs in its own session with its output in a log file, and asks the kernel for SIGTERM when its
parent dies (`PR_SET_PDEATHSIG`: start it from the main thread); `stop()` SIGTERMs the process group, waits, then
SIGKILLs it, and runs on `close()`, at interpreter exit and from SIGTERM / SIGHUP handlers that chain to the previous
ones. Start-up fails fast (exit, or no `/health` within `startup_timeout_s`) with the last lines of its log. Why a
process and not a second in-process `vllm.LLM`: docs/verifier.md, "Modes". The restart policy and the client are
in [`~rlce_trl.verifiers.colocate`].
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import KW_ONLY, dataclass
from pathlib import Path

from .base import VerifierUnavailableError

logger = logging.getLogger(__name__)

SERVED_MODEL_NAME = "rlce-verifier"

#: Servers still running: stopped at exit and on SIGTERM / SIGHUP (`_install_handlers`).
_LIVE: set[VLLMServerProcess] = set()
_LIVE_LOCK = threading.Lock()


def _stop_all() -> None:
    with _LIVE_LOCK:
        processes = list(_LIVE)
    for process in processes:
        with contextlib.suppress(Exception):  # best effort at exit
            process.stop()


def _chain_signal(signum, frame, previous) -> None:
    _stop_all()
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:  # SIG_DFL or unknown: restore, re-deliver; exit status: "killed by signal"
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


@functools.cache  # once per process
def _install_handlers() -> None:
    atexit.register(_stop_all)
    if threading.current_thread() is not threading.main_thread():
        logger.warning("vLLM verifier server started outside the main thread: relying on atexit and PDEATHSIG only.")
        return
    # SIGINT is left alone: Python turns it into KeyboardInterrupt, the trainer unwinds and atexit stops the server
    # (the server, in its own session, does not receive the terminal's Ctrl-C itself).
    for signum in (signal.SIGTERM, signal.SIGHUP):
        previous = signal.getsignal(signum)
        signal.signal(signum, lambda s, f, p=previous: _chain_signal(s, f, p))


# The child first asks for SIGTERM on parent death, checks the parent is still the one that started it, then execs.
_TRAMPOLINE = (
    "import contextlib, ctypes, os, signal, sys\n"
    "with contextlib.suppress(Exception):\n"
    "    ctypes.CDLL('libc.so.6', use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(1)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


#: Its one thread starts on the first spawn and lives as long as the process (see `_spawn`).
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rlce-vllm-spawn")


def _spawn(*args, **kwargs) -> subprocess.Popen:
    """`subprocess.Popen` on one long-lived thread: the kernel ties the child's parent-death signal to the thread that
    forked it, so a server started from a thread that then ends (a restart from a worker thread) would be terminated
    with it."""
    return _SPAWNER.submit(subprocess.Popen, *args, **kwargs).result()


def hold_port(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A socket bound to `port` (0: a free one) with `SO_REUSEADDR` and never listening: while it is open the kernel
    gives the port to no other bind (no other rank's free port, none of vLLM's own ports), yet the server child,
    which binds with `SO_REUSEADDR` as vLLM and uvicorn do, can bind it and listen. Close it once the child listens."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


#: What the server child inherits from the trainer's environment: an allow-list. torchrun / accelerate / DeepSpeed /
#: TRL export RANK, WORLD_SIZE, MASTER_*, TORCHELASTIC_* (TORCHELASTIC_USE_AGENT_STORE makes vLLM <= 0.27 on torch
#: <= 2.13 wait for an agent store nobody runs), GROUP_* / ROLE_*, ACCELERATE_* and more; none of them may reach the
#: server, which is a world of its own.
CHILD_ENV_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "LANG", "LANGUAGE", "TMPDIR", "TEMP", "TMP",
    "PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONHASHSEED", "PYTHONWARNINGS", "LD_LIBRARY_PATH", "LD_PRELOAD", "CC", "CXX",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
})
CHILD_ENV_PREFIXES = (
    "LC_", "XDG_", "HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TOKENIZERS_", "VLLM_", "CUDA_", "NVIDIA_", "NCCL_",
    "HIP_", "ROCR_", "ROCM_", "OMP_", "KMP_", "MKL_", "OPENBLAS_", "GOMP_", "TORCH_", "PYTORCH_", "TORCHINDUCTOR_",
    "TRITON_", "NUMBA_",
)
#: Never passed, although a prefix above matches: vLLM's own port and data-parallel world (a trainer's engine's).
CHILD_ENV_BLOCKED = frozenset({"VLLM_PORT"})
CHILD_ENV_BLOCKED_PREFIXES = ("VLLM_DP_",)


def child_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The part of `environ` (default: this process's) the verifier server may see (`CHILD_ENV_*`)."""
    environ = os.environ if environ is None else environ
    return {
        key: value for key, value in environ.items()
        if (key in CHILD_ENV_NAMES or key.startswith(CHILD_ENV_PREFIXES))
        and key not in CHILD_ENV_BLOCKED and not key.startswith(CHILD_ENV_BLOCKED_PREFIXES)
    }


def vllm_python() -> str:
    """The interpreter that has vLLM: `$RLCE_VLLM_PYTHON`, else this one."""
    return os.environ.get("RLCE_VLLM_PYTHON") or sys.executable


@dataclass(eq=False, repr=False)  # compared and hashed by identity (the live set)
class VLLMServerProcess:
    """One `vllm.entrypoints.openai.api_server` child process serving a frozen checkpoint.

    Args:
        model: checkpoint directory (or hub id when online) of the frozen initial policy.
        python: interpreter with vLLM installed (default: `$RLCE_VLLM_PYTHON` or the current one).
        host / port: where it listens; `port=None` picks a free port and holds it (`hold_port`) until the server
            answers. Keep `host` on loopback unless other nodes must reach it.
        gpu_memory_utilization: the server's share of each GPU's *total* memory (`--gpu-memory-utilization`).
        devices: `CUDA_VISIBLE_DEVICES` of the child (e.g. `"3"`), `None` to inherit.
        tensor_parallel_size, max_model_len, max_num_seqs, dtype, seed, enforce_eager, enable_prefix_caching: the
            usual vLLM options.
        enable_sleep_mode: start with `--enable-sleep-mode` and the dev endpoints (`/sleep`, `/wake_up`).
        extra_args: more command-line arguments, appended as is.
        env: extra environment variables of the child (e.g. `{"VLLM_CPU_KVCACHE_SPACE": "1"}` on CPU), on top of
            the allow-listed part of the trainer's (`child_environment`).
        log_path: where its stdout/stderr go (default: a temporary file, kept after exit for post-mortems).
        startup_timeout_s: how long `start()` waits for `/health`.
    """

    model: str | os.PathLike
    _: KW_ONLY
    python: str | None = None
    host: str = "127.0.0.1"
    port: int | None = None
    gpu_memory_utilization: float | None = None
    devices: str | None = None
    tensor_parallel_size: int = 1
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    dtype: str | None = None
    seed: int | None = 0
    enforce_eager: bool = False
    enable_prefix_caching: bool = True
    enable_sleep_mode: bool = False
    served_model_name: str = SERVED_MODEL_NAME
    extra_args: Sequence[str] = ()
    env: dict[str, str] | None = None
    log_path: str | os.PathLike | None = None
    startup_timeout_s: float = 900.0

    def __post_init__(self) -> None:
        self.model = str(self.model)
        python = self.python or vllm_python()
        self.python = shutil.which(python) or python  # execv needs a path
        self._held: socket.socket | None = None
        if not self.port:
            self._held = hold_port(self.host)
            self.port = self._held.getsockname()[1]
        self.extra_args, self.env = list(self.extra_args), dict(self.env or {})
        if self.log_path is None:
            handle, self.log_path = tempfile.mkstemp(prefix=f"rlce-verifier-vllm-{self.port}-", suffix=".log")
            os.close(handle)
        self.log_path = Path(self.log_path)
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}"

    def command(self) -> list[str]:
        cmd = [self.python, "-m", "vllm.entrypoints.openai.api_server", "--disable-uvicorn-access-log"]
        valued = {"--model": self.model, "--served-model-name": self.served_model_name, "--host": self.host,
                  "--port": self.port, "--tensor-parallel-size": self.tensor_parallel_size,
                  "--gpu-memory-utilization": self.gpu_memory_utilization, "--max-model-len": self.max_model_len,
                  "--max-num-seqs": self.max_num_seqs, "--dtype": self.dtype, "--seed": self.seed}
        cmd += [part for flag, value in valued.items() if value is not None for part in (flag, str(value))]
        switches = {"--enforce-eager": self.enforce_eager, "--enable-prefix-caching": self.enable_prefix_caching,
                    "--enable-sleep-mode": self.enable_sleep_mode}
        cmd += [flag for flag, on in switches.items() if on]
        # JSON outputs without free whitespace (small models otherwise spend `max_tokens` on spaces inside the JSON):
        # vLLM 0.31 takes it per server, not per request, and only with an explicit xgrammar / guidance backend.
        cmd += ["--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}']
        return cmd + self.extra_args

    def _child_env(self) -> dict[str, str]:
        env = child_environment()  # an allow-list: the trainer's distributed world must not reach the server
        if self.devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.devices
        if self.enable_sleep_mode:
            env["VLLM_SERVER_DEV_MODE"] = "1"
        env.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
        env.setdefault("VLLM_NO_USAGE_STATS", "1")
        env.update(self.env)
        return env

    def start(self, wait: bool = True) -> VLLMServerProcess:
        if self.is_alive():
            return self
        _install_handlers()
        if self._held is None:  # a restart: hold the port again until the new child binds it (best effort)
            with contextlib.suppress(OSError):
                self._held = hold_port(self.host, self.port)
        cmd = self.command()
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== rlce-trl: starting {shlex.join(cmd)}\n".encode())
            log.flush()
            self.proc = _spawn(
                [sys.executable, "-c", _TRAMPOLINE, str(os.getpid()), *cmd],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=self._child_env(), start_new_session=True, close_fds=True,
            )
        self.starts += 1
        with _LIVE_LOCK:
            _LIVE.add(self)
        logger.info("Started the vLLM verifier server (pid %d) at %s; log: %s", self.proc.pid, self.base_url,
                    self.log_path)
        if wait:
            self.wait_until_healthy()
        return self

    def wait_until_healthy(self, timeout_s: float | None = None) -> None:
        import httpx

        timeout_s = self.startup_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        with httpx.Client(trust_env=False, timeout=2.0) as client:
            while True:
                if not self.is_alive():
                    code = self.proc.returncode if self.proc else None
                    self.stop()
                    raise VerifierUnavailableError(
                        f"The vLLM verifier server exited during start-up (exit code {code}). Command: "
                        f"{shlex.join(self.command())}\nLast lines of {self.log_path}:\n{self.log_tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.base_url}/health").status_code == 200:
                        self._release_port()  # the child listens on it now
                        return
                if time.monotonic() >= deadline:
                    self.stop()
                    raise VerifierUnavailableError(
                        f"The vLLM verifier server did not answer {self.base_url}/health within {timeout_s:.0f} s "
                        f"(verifier_startup_timeout). Last lines of {self.log_path}:\n{self.log_tail()}"
                    )
                time.sleep(0.5)

    def _release_port(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held.close()

    def is_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM the server's process group, wait up to `timeout_s`, then SIGKILL it. Safe to call twice."""
        proc = self.proc
        with _LIVE_LOCK:
            _LIVE.discard(self)
        self._release_port()
        if proc is None:
            return
        pgid = proc.pid  # start_new_session: the child leads its own group
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=timeout_s)
        # The leader may be gone while engine-core children linger: always sweep the group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            logger.error("vLLM verifier server pid %d did not exit after SIGKILL", proc.pid)

    def restart(self) -> None:
        self.stop()
        self.start(wait=True)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:])

    def sleep(self, level: int = 1) -> None:
        import httpx

        httpx.post(f"{self.base_url}/sleep", params={"level": level}, timeout=300, trust_env=False).raise_for_status()

    def wake_up(self) -> None:
        import httpx

        httpx.post(f"{self.base_url}/wake_up", timeout=300, trust_env=False).raise_for_status()
