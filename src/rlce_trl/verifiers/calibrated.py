"""Verdicts read through a fitted calibration (VeriFine-style): [`VerdictCalibration`] (how to read a verdict from
choice log-probabilities, fitted by `rlce-trl calibrate fit`) and [`CalibratedVerifier`], the opt-in training
wrapper that re-reads validation replies through it."""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from ..data.jsonl import write_json
from .base import Reply, Request, Verifier

logger = logging.getLogger(__name__)


def _normalised(logprobs: dict[str, float]) -> dict[str, float]:
    top = max(logprobs.values())
    weights = {k: math.exp(v - top) for k, v in logprobs.items()}
    total = sum(weights.values())
    return {k: w / total for k, w in weights.items()}


@dataclass
class VerdictCalibration:
    """How to read a verdict from choice log-probabilities, fitted for one prompt version."""

    version: str = "default"
    prior: dict[str, float] | None = None  # content-free verdict distribution; None: no contextual calibration
    band: float = 0.0  # yes/no log-odds margin below which the verdict is "unknown"
    fitted_on: int = 0  # calibration cases used

    def _probabilities(self, choice_logprobs: dict[str, float]) -> dict[str, float]:
        probs = _normalised(choice_logprobs)
        if self.prior:
            probs = {k: p / max(self.prior.get(k, 1.0), 1e-9) for k, p in probs.items()}
        return probs

    def margin(self, choice_logprobs: dict[str, float]) -> float:
        """The calibrated yes/no log-odds margin (a missing choice counts as probability 1e-30)."""
        probs = self._probabilities(choice_logprobs)
        return abs(math.log(max(probs.get("yes", 1e-30), 1e-30)) - math.log(max(probs.get("no", 1e-30), 1e-30)))

    def verdict(self, choice_logprobs: dict[str, float]) -> str:
        probs = self._probabilities(choice_logprobs)
        best = max(probs, key=probs.get)
        if best in ("yes", "no") and "yes" in probs and "no" in probs and self.margin(choice_logprobs) < self.band:
            return "unknown"
        return best

    def save(self, path: str | Path) -> None:
        write_json(asdict(self), path)

    @classmethod
    def load(cls, path: str | Path) -> VerdictCalibration:
        """Read a calibration file, or a built-in one by name (`smollm2-135m-instruct`: fitted on the calibration half
        of the claim set for the built-in prompts)."""
        path = builtin_calibration(path)
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            calibration = cls(**data)
        except OSError as error:
            raise ValueError(f"Cannot read the verdict calibration {path}: {error.strerror}.") from None
        except (json.JSONDecodeError, TypeError) as error:
            raise ValueError(
                f"{path} is not a verdict calibration ({error}); write one with `rlce-trl calibrate fit`."
            ) from None
        if calibration.band < 0 or (
            calibration.prior is not None and not all(v > 0 for v in calibration.prior.values())
        ):
            raise ValueError(f"{path}: `band` must be >= 0 and every `prior` value > 0.")
        return calibration


def builtin_calibration(name_or_path: str | Path) -> Path:
    """A path as given, or the packaged `<name>.verdicts.json` when no such file exists and the name is built in."""
    path = Path(name_or_path)
    if path.exists() or path.name != str(name_or_path):  # an existing file, or a path rather than a bare name
        return path
    packaged = Path(__file__).with_name(f"{path.name}.verdicts.json")
    return packaged if packaged.exists() else path


class CalibratedVerifier(Verifier):
    """Opt-in wrapper for training: validation replies are re-read through a [`VerdictCalibration`]; everything
    else passes through unchanged. Replies without choice log-probabilities keep their text (counted)."""

    def __init__(self, inner: Verifier, calibration: VerdictCalibration):
        super().__init__()
        self.inner, self.calibration = inner, calibration
        self.name = f"{inner.name}+calibrated"
        self.supports_structured_output = inner.supports_structured_output
        self.uncalibrated = 0

    def _generate(self, requests: list[Request]) -> list[Reply]:
        replies = self.inner.generate(requests)
        for request, reply in zip(requests, replies, strict=True):
            if request.stage != "validation" or reply.error is not None:
                continue
            if not reply.choice_logprobs:
                self.uncalibrated += 1
                if self.uncalibrated == 1:
                    logger.warning(
                        "%s gives no choice log-probabilities: verdicts are read uncalibrated.", self.inner.name
                    )
                continue
            reply.texts = [self.calibration.verdict(reply.choice_logprobs)]
        return replies

    def transport_metrics(self) -> dict[str, float]:
        return self.inner.transport_metrics()

    def session(self):
        return self.inner.session()

    def __getattr__(self, name):  # backend extras (server_stats, restarts, ...) come from the wrapped verifier
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def close(self) -> None:
        self.inner.close()
