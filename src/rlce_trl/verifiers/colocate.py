"""`verifier_mode="colocate"`: one [`VLLMServerProcess`] per training rank, on that rank's GPU, holding one copy of
the frozen model, and the restart and sleep policy around it (built by `from_config.remote_verifier`)."""

from __future__ import annotations

import logging
import os

from .base import Reply
from .server import ServerVerifier, VerifierUnavailableError
from .vllm_process import VLLMServerProcess

logger = logging.getLogger(__name__)


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

    def _before_call(self) -> None:
        if not self.process.is_alive():
            code = self.process.proc.returncode if self.process.proc else None
            tail = self.process.log_tail(20)
            if self.restarts >= self.max_restarts:
                raise VerifierUnavailableError(
                    f"The vLLM verifier server died (exit code {code}) and was already restarted {self.restarts} "
                    f"time(s), the most allowed in one run. Last lines of {self.process.log_path}:"
                    f"\n{tail}"
                )
            self.restarts += 1
            logger.error("The vLLM verifier server died (exit code %s); restarting it (%d/%d). Last log lines:\n%s",
                         code, self.restarts, self.max_restarts, tail)
            try:
                self.process.restart()
            except VerifierUnavailableError as error:  # it cannot come back: say that it died first
                raise VerifierUnavailableError(
                    f"The vLLM verifier server died (exit code {code}) and could not be restarted: {error}"
                ) from error
            with self._lock:
                self._down.clear()
        elif self.sleep_between_calls:  # a freshly started server is awake already
            self.process.wake_up()

    def _after_call(self, replies: list[Reply]) -> None:
        if self.sleep_between_calls and self.process.is_alive():
            try:
                self.process.sleep(level=1)
            except Exception as error:  # noqa: BLE001 - a failed sleep costs memory, not correctness
                logger.warning("Could not put the verifier server to sleep: %s", error)
        super()._after_call(replies)

    def transport_metrics(self) -> dict[str, float]:
        return {**super().transport_metrics(), "verifier_restarts_total": float(self.restarts)}

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.process.stop()
