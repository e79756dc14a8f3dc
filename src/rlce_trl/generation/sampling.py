"""Decoding settings, shared by the verifiers' requests and the candidate generators."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sampling:
    """Decoding settings of one request, for the verifiers and the generators alike. `temperature == 0` means greedy
    (top-p, top-k and the seed are then ignored). The generators of `generation.generators` take their length from
    their own `max_new_tokens` and one sample per setting, so they read `temperature`, `top_p`, `top_k` and `seed`."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0 disables top-k
    max_tokens: int = 128
    n: int = 1  # independent samples for this request (vLLM's `n`, transformers' `num_return_sequences`)
    #: The stage reads only the reply's first non-blank line: a backend may end a sample as soon as that line has
    #: ended (`first_line_ended`), with finish reason "stop". The transformers backend does; others ignore it.
    one_line: bool = False
    seed: int = 0  # the sampling seed of a generator candidate (the verifiers' backends seed per call)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0
