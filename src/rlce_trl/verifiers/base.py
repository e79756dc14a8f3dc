"""The one small interface every verifier backend implements.

The evidence pipeline never talks to a model directly: each stage turns the state of the whole step into a list of
[`Request`]s, a backend executes the list in one batched call and returns one [`Reply`] per request, and the stage
turns the replies into new state. A backend is therefore tested once against this contract, and the method is tested
with scripted replies.

Nothing here imports torch: the method core depends on this module only.
"""

from __future__ import annotations

import contextlib
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace

from ..generation.sampling import Sampling


class VerifierUnavailableError(RuntimeError):
    """The verifier failed persistently (server unreachable, process dead): the run cannot produce rewards."""


_DEADLINE = threading.local()


@contextlib.contextmanager
def deadline(at: float | None):
    """Verifier calls made inside, from this thread, end by the monotonic time `at` (nested deadlines: the earliest);
    a request still open then fails. Server backends honour it; an in-process forward pass cannot be cut short."""
    previous = current_deadline()
    _DEADLINE.at = min((d for d in (previous, at) if d is not None), default=None)
    try:
        yield
    finally:
        _DEADLINE.at = previous


def current_deadline() -> float | None:
    """The deadline [`deadline`] set for this thread, or `None`."""
    return getattr(_DEADLINE, "at", None)


def first_line_ended(text: str) -> bool:
    """Whether `text` holds its first non-blank line whole, a line break after it (code fences ignored): what a
    `one_line` reply is read for is then fixed, whatever follows."""
    for line in text.replace("```", "").splitlines(keepends=True):
        if line.strip():
            return line.splitlines()[0] != line
    return False


@dataclass
class Request:
    """One prompt for the frozen verifier.

    Args:
        messages: chat messages. Stages put the sample context first, so that all requests of a group share it as a
            prefix (a prefix cache then serves it once).
        sampling: decoding settings.
        choices: structured output, the reply must be exactly one of these strings (guided choice). Backends that
            cannot constrain decoding ignore it; the stage's tolerant parser handles the free reply.
        json_schema: structured output, the reply must be a JSON document matching this schema. Same fallback.
        stage: the pipeline stage that made the request (`"equivalence"`, `"construction"`, `"validation"`, ...),
            used for per-stage accounting only.
        media: the sample's clips, shown with the first user turn (`rlce_trl.data.media`): video blocks with their
            frames or a `source` reference to them. Vision-language backends show them; text backends cannot.
    """

    messages: list[dict[str, str]]
    sampling: Sampling = field(default_factory=Sampling)
    choices: tuple[str, ...] | None = None
    json_schema: dict | None = None
    stage: str = ""
    media: list[dict] | None = None


@dataclass
class Reply:
    """The backend's answer to one [`Request`]: `sampling.n` texts, or an error that the stage counts as abstention.

    `choice_logprobs` keeps the model's confidence in each closed decision of a greedy constrained request (`None`
    otherwise, and on backends that cannot report it). Values are natural-log probabilities under the model's full
    softmax at the slot where the decision is taken (before the constraint masks other tokens; not renormalised over
    the choices, so `logsumexp` of a slot's values is the mass the model put on the allowed choices), of the token
    that starts each choice: exactly the choice's log-probability when the choice is one token, as the verdicts and
    `same` / `different` are for SmolLM2 and most BPE vocabularies. Keys:

    - guided choice (`Request.choices`): the choice itself, e.g. `{"yes": -0.1, "no": -2.5, "unknown": -3.9}`;
    - a JSON object of string enums (`Request.json_schema`, the equivalence reply): `"<field>=<option>"`, e.g.
      `{"P1=same": -0.3, "P1=different": -1.4, "P2=same": ...}`, each slot scored given the reply written so far
      (the earlier decisions).

    A choice the backend could not score (a server's top-`k` logprobs did not include it) is left out of the dict.
    """

    texts: list[str]
    finish_reasons: list[str]  # "stop", "length" (hit max_tokens) or "error", one per text
    num_tokens: int = 0  # generated tokens over all texts
    error: str | None = None
    choice_logprobs: dict[str, float] | None = None

    @classmethod
    def failed(cls, n: int, error: str) -> Reply:
        return cls(texts=[""] * n, finish_reasons=["error"] * n, num_tokens=0, error=error)


@dataclass
class VerifierStats:
    """Running totals of verifier work, per stage. The trainer logs the per-step difference."""

    calls: int = 0
    requests: int = 0
    generated_tokens: int = 0
    failed_requests: int = 0
    seconds: float = 0.0
    prompt_chars: int = 0  # characters of the requests' messages (backends do not report prompt tokens)
    calls_by_stage: dict[str, int] = field(default_factory=dict)

    def snapshot(self) -> VerifierStats:
        return replace(self, calls_by_stage=dict(self.calls_by_stage))

    def since(self, before: VerifierStats) -> VerifierStats:
        totals = [getattr(self, f.name) - getattr(before, f.name) for f in fields(self) if f.name != "calls_by_stage"]
        return VerifierStats(*totals, {k: v - before.calls_by_stage.get(k, 0) for k, v in self.calls_by_stage.items()})


class Verifier(ABC):
    """A frozen model that answers batches of requests.

    Subclasses implement [`~Verifier._generate`]; callers use [`~Verifier.generate`], which keeps the statistics.
    One `generate` call is one batched call: backends decide how to split it (micro-batches, concurrency) internally.
    """

    #: Short name written to logs and model cards.
    name: str = "verifier"
    #: Whether `Request.choices` / `Request.json_schema` are enforced during decoding.
    supports_structured_output: bool = False

    def __init__(self) -> None:
        self.stats = VerifierStats()

    @contextlib.contextmanager
    def session(self):
        """Calls made inside may share what the backend caches of their prompts (the stages of one reward step read
        the same sample contexts); the cache is dropped on exit. Nothing by default."""
        yield self

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        if not requests:
            return []
        start = time.perf_counter()
        replies = self._generate(list(requests))
        if len(replies) != len(requests):
            raise RuntimeError(f"{type(self).__name__} returned {len(replies)} replies for {len(requests)} requests.")
        self.stats.calls += 1
        self.stats.requests += len(requests)
        self.stats.generated_tokens += sum(r.num_tokens for r in replies)
        self.stats.prompt_chars += sum(len(m["content"]) for r in requests for m in r.messages)
        self.stats.failed_requests += sum(r.error is not None for r in replies)
        self.stats.seconds += time.perf_counter() - start
        for stage in {r.stage for r in requests}:
            self.stats.calls_by_stage[stage] = self.stats.calls_by_stage.get(stage, 0) + 1
        return replies

    @abstractmethod
    def _generate(self, requests: list[Request]) -> list[Reply]:
        """Answer every request, in order. Never raise for one bad request: return `Reply.failed` for it."""

    def transport_metrics(self) -> dict[str, float]:
        """Cumulative transport counters the trainer logs under `<method>/` (retries, timeouts, restarts, ...);
        in-process backends have none. A wrapper returns its wrapped verifier's, so that wrapping hides nothing."""
        return {}

    def close(self) -> None:  # noqa: B027 -- optional hook: most backends hold nothing to release
        """Release engines, processes and connections. Safe to call twice."""
