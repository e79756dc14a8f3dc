"""The vision-language transformers backend: a frozen VLM and its processor answer requests that carry the clip.

A request's `media` (video blocks with frames or a `source` reference, `rlce_trl.data.media`) is put before the text
of its first user turn and rendered by the processor with the settings the policy uses (`rlce-trl evaluate`'s
`VisionLanguageGenerator.encode`: no re-sampling, the clip's own timestamps). Requests without media are plain text
prompts of the same model. Replies come from `model.generate`, as on the text backend's `generate` path.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch

from ..data.media import with_media
from ..generation.hf import evaluating, load_frozen_vlm  # noqa: F401 - load_frozen_vlm: public here
from .base import Reply, Request
from .transformers_backend import FrozenModelVerifier, settings_key


class VisionLanguageVerifier(FrozenModelVerifier):
    """Frozen verifier on a transformers vision-language model (`AutoModelForImageTextToText`) and its processor.

    Args:
        model: the frozen model; put in eval mode, never receives gradients (unless `context` is given, see below).
        processor: its processor (the policy's, so that frames are rendered as the policy sees them).
        batch_size: prompts per `model.generate` call (each expanded `n` times for sampled requests).
        context: optional factory of a context manager entered around generation (a PEFT model's `disable_adapter`).
    """

    name = "transformers-vlm"

    def __init__(
        self,
        model,
        processor,
        batch_size: int = 16,
        context: Callable[[], contextlib.AbstractContextManager] | None = None,
    ):
        from ..generation.generators import VisionLanguageGenerator

        super().__init__(model, processor.tokenizer, batch_size, context)
        self.processor = processor
        self._encoder = VisionLanguageGenerator(None, processor)
        # a sampled pad token would have no pixels behind it
        pads = [getattr(processor, name, None) for name in ("video_token_id", "image_token_id")]
        self._suppress = [t for t in pads if isinstance(t, int)]

    def _generate(self, requests: list[Request]) -> list[Reply]:
        settings = [settings_key(r) for r in requests]
        replies: list[Reply | None] = [None] * len(requests)
        with self.context(), torch.inference_mode(), evaluating(self.model):
            for key in sorted(set(settings)):  # groups in key order, each in request order
                same = [k for k in range(len(requests)) if settings[k] == key]
                for begin in range(0, len(same), self.batch_size):
                    chunk = same[begin : begin + self.batch_size]
                    for k, reply in zip(chunk, self._generate_chunk([requests[k] for k in chunk]), strict=True):
                        replies[k] = reply
        return replies  # type: ignore[return-value]

    def _generate_chunk(self, requests: list[Request]) -> list[Reply]:
        tok = self.tokenizer
        side, tok.padding_side = tok.padding_side, "left"
        try:
            batch = self._encoder.encode([with_media(r.messages, r.media) for r in requests])
        finally:
            tok.padding_side = side
        extra = {"suppress_tokens": self._suppress} if self._suppress else {}
        return self._generate_batch(batch.to(self.model.device), requests[0], **extra)
