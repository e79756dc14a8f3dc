"""Score a prompt version against labelled cases, and calibrated verdicts (opt-in, beyond the VeriFine paper).

`score_prompts` asks the validator every case in one batched call, exactly as training does (same request builder,
same tolerant verdict parser; an unreadable reply counts as "unknown" and is reported), and returns an [`Alignment`].

`VerdictCalibration` reads a verdict from the per-choice log-probabilities of a guided-choice reply
(`Reply.choice_logprobs`) instead of the argmax text:
- **contextual calibration** (Zhao et al., 2021): the verdict distribution is divided by the model's prior for a
  content-free claim ("N/A", "", "[MASK]") under the same prompt template and renormalised;
- an **"unknown" band**: a yes/no verdict whose calibrated log-odds margin is below `band` becomes "unknown".
Both are fitted on the calibration half of a case set (`fit_calibration`) and apply to one prompt version.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..evidence.prompt_set import VerifierPrompts
from ..evidence.prompts import VERDICTS
from ..evidence.validation import parse_verdict, validation_request
from ..verifiers.base import Reply, Request, Verifier
from ..verifiers.calibrated import VerdictCalibration, _normalised
from .cases import CalibrationCase
from .metrics import METRICS, Alignment, alignment

logger = logging.getLogger(__name__)

CONTENT_FREE_CLAIMS = ("N/A", "", "[MASK]")


def _requests(prompts: VerifierPrompts, pairs: Sequence[tuple[str, str]]) -> list[Request]:
    """Validation requests of up to 4 tokens (a verdict)."""
    return [validation_request(context, test, 4, prompts=prompts) for context, test in pairs]


def read_verdicts(replies: Sequence[Reply], calibration: VerdictCalibration | None = None) -> tuple[list[str], int]:
    """One verdict per reply and the number of unreadable replies (counted as "unknown"). With a calibration, replies
    carrying `choice_logprobs` are read through it."""
    verdicts, unreadable = [], 0
    for reply in replies:
        if calibration is not None and reply.choice_logprobs and reply.error is None:
            verdicts.append(calibration.verdict(reply.choice_logprobs))
            continue
        text, finish = (reply.texts[0], reply.finish_reasons[0]) if reply.texts else ("", "error")
        verdict, _ = parse_verdict(text, "error" if reply.error else finish)
        unreadable += verdict is None
        verdicts.append(verdict or "unknown")
    return verdicts, unreadable


def ask(verifier: Verifier, prompts: VerifierPrompts, cases: Sequence[CalibrationCase]) -> list[Reply]:
    """The validator's replies to every case, in one batched call."""
    return verifier.generate(_requests(prompts, [(c.context, c.test) for c in cases]))


def score_prompts(verifier: Verifier, prompts: VerifierPrompts, cases: Sequence[CalibrationCase],
                  calibration: VerdictCalibration | None = None, resamples: int = 1000, seed: int = 0,
                  replies: Sequence[Reply] | None = None) -> Alignment:
    """Validator agreement with the labels of `cases` (accuracy, kappa, yes-rate, each with a bootstrap CI)."""
    replies = ask(verifier, prompts, cases) if replies is None else replies
    verdicts, unreadable = read_verdicts(replies, calibration)
    version = prompts.version + ("+calibrated" if calibration is not None else "")
    return alignment(version, verdicts, [c.label for c in cases], unreadable, resamples, seed)


def content_free_prior(verifier: Verifier, prompts: VerifierPrompts, contexts: Sequence[str]) -> dict[str, float]:
    """The mean verdict distribution for content-free claims under this template, over (up to 8 of) the contexts."""
    contexts = list(dict.fromkeys(contexts))[:8] or [""]
    pairs = [(context, claim) for context in contexts for claim in CONTENT_FREE_CLAIMS]
    replies = verifier.generate(_requests(prompts, pairs))
    dists = [_normalised(r.choice_logprobs) for r in replies if r.choice_logprobs and r.error is None]
    if not dists:
        raise ValueError(f"The verifier ({verifier.name}) returned no choice log-probabilities: calibrated verdicts "
                         "need a backend that scores guided choices (the transformers backend does).")
    return {k: sum(d.get(k, 0.0) for d in dists) / len(dists) for k in VERDICTS if any(k in d for d in dists)}


def fit_calibration(verifier: Verifier, prompts: VerifierPrompts, cases: Sequence[CalibrationCase],
                    contextual: bool = True, band: bool = True, metric: str = "kappa",
                    replies: Sequence[Reply] | None = None,
                    prior: dict[str, float] | None = None) -> VerdictCalibration:
    """Fit the prior (content-free claims over the cases' contexts; or the `prior` given) and the band (the margin,
    among 0 and the observed margins' quantiles, that maximises `metric` on `cases`). `replies`: the verifier's
    replies to `cases`, when already asked."""
    if metric not in METRICS or metric == "yes_rate":
        raise ValueError(f"Fit on accuracy or kappa, not {metric!r}.")
    if not contextual:
        prior = None
    elif prior is None:
        prior = content_free_prior(verifier, prompts, [c.context for c in cases])
    replies = ask(verifier, prompts, cases) if replies is None else replies
    if not any(r.choice_logprobs for r in replies):
        raise ValueError(f"The verifier ({verifier.name}) returned no choice log-probabilities for the cases.")
    gold = [c.label for c in cases]

    def score(margin: float) -> float:
        return METRICS[metric](read_verdicts(replies, VerdictCalibration(prompts.version, prior, margin))[0], gold)

    best_band, best_value = 0.0, score(0.0)
    if band:
        unbanded = VerdictCalibration(prompts.version, prior)
        margins = sorted(unbanded.margin(r.choice_logprobs) for r in replies if r.choice_logprobs)
        candidates = {margins[int(q * (len(margins) - 1))] + 1e-6 for q in (0.05, 0.1, 0.2, 0.3, 0.4, 0.5)}
        for candidate in sorted(candidates):
            value = score(candidate)
            if value > best_value + 1e-12:
                best_band, best_value = candidate, value
    return VerdictCalibration(prompts.version, prior, best_band, len(cases))
