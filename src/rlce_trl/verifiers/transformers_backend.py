"""The transformers backend: a frozen Hugging Face model generating in-process (CPU, tests, small models).

One `generate` call of the pipeline becomes a few `model.generate` calls: requests are grouped by decoding settings
(greedy or sampled, `n`, allowed choices), sorted by prompt length so padding stays small, and cut into micro-batches
of `batch_size` prompts. Guided choice (`Request.choices`) is enforced with `prefix_allowed_tokens_fn`, so verdicts
come back as exactly "yes", "no" or "unknown"; JSON schemas are not enforced here (the tolerant parser reads them).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from itertools import groupby

import torch

from .base import Reply, Request, Verifier

logger = logging.getLogger(__name__)


class _ChoiceTrie:
    """Token-level trie over the allowed replies; after a complete reply only end-of-sequence is allowed."""

    def __init__(self, tokenizer, choices: tuple[str, ...], eos_id: int):
        self.eos_id = eos_id
        self.root: dict = {}
        for choice in choices:
            node = self.root
            for token in tokenizer(choice, add_special_tokens=False)["input_ids"]:
                node = node.setdefault(token, {})
            node[eos_id] = {}

    def allowed(self, generated: list[int]) -> list[int]:
        node = self.root
        for token in generated:
            if token not in node:
                return [self.eos_id]
            node = node[token]
        return list(node) or [self.eos_id]


class TransformersVerifier(Verifier):
    """Frozen verifier on a transformers causal LM.

    Args:
        model: the frozen model. It is put in eval mode and never receives gradients.
        tokenizer: its tokenizer, with a chat template.
        batch_size: prompts per `model.generate` call (each expanded `n` times for sampled requests).
        context: optional factory of a context manager entered around generation, e.g. a PEFT model's
            `disable_adapter` so that the base weights answer. The model is switched to eval mode inside it and
            restored afterwards, so a model that is also being trained can serve.
    """

    name = "transformers"
    supports_structured_output = True  # guided choice only

    def __init__(
        self,
        model,
        tokenizer,
        batch_size: int = 16,
        context: Callable[[], contextlib.AbstractContextManager] | None = None,
    ):
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.context = context or contextlib.nullcontext
        if context is None:  # a dedicated frozen copy: freeze it once
            model.eval()
            model.requires_grad_(False)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        eos = model.generation_config.eos_token_id
        self.eos_ids = sorted({*([eos] if isinstance(eos, int) else (eos or [])), tokenizer.eos_token_id} - {None})
        self._tries: dict[tuple[str, ...], _ChoiceTrie] = {}

    def _prompt(self, request: Request) -> str:
        return self.tokenizer.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True)

    def _generate(self, requests: list[Request]) -> list[Reply]:
        prompts = [self._prompt(r) for r in requests]
        lengths = [len(self.tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts]

        def setting(k: int):
            r = requests[k]
            return (r.sampling, r.choices or ())

        order = sorted(range(len(requests)), key=lambda k: (repr(setting(k)), lengths[k]))
        replies: list[Reply | None] = [None] * len(requests)
        was_training = self.model.training
        with self.context(), torch.inference_mode():
            self.model.eval()
            try:
                for _, same in groupby(order, key=lambda k: repr(setting(k))):
                    same = list(same)
                    for start in range(0, len(same), self.batch_size):
                        chunk = same[start : start + self.batch_size]
                        for k, reply in zip(chunk, self._generate_chunk([prompts[k] for k in chunk], requests[chunk[0]])):
                            replies[k] = reply
            finally:
                self.model.train(was_training)
        return replies  # type: ignore[return-value]

    def _generate_chunk(self, prompts: list[str], request: Request) -> list[Reply]:
        sampling = request.sampling
        tok = self.tokenizer
        tok.padding_side = "left"
        batch = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.model.device)
        prompt_len = batch["input_ids"].shape[1]
        kwargs = dict(
            max_new_tokens=sampling.max_tokens,
            num_return_sequences=sampling.n,
            pad_token_id=tok.pad_token_id,
            eos_token_id=self.eos_ids,
        )
        if sampling.greedy:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        else:
            kwargs.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k or None)
        if request.choices:
            key = tuple(request.choices)
            if key not in self._tries:
                self._tries[key] = _ChoiceTrie(tok, key, self.eos_ids[0])
            trie = self._tries[key]
            kwargs["prefix_allowed_tokens_fn"] = lambda _, ids: trie.allowed(ids[prompt_len:].tolist())
        output = self.model.generate(**batch, **kwargs)[:, prompt_len:]
        replies = []
        for i in range(len(prompts)):
            texts, finishes, num_tokens = [], [], 0
            for row in output[i * sampling.n : (i + 1) * sampling.n].tolist():
                ends = [p for p, t in enumerate(row) if t in self.eos_ids]
                stop = ends[0] if ends else len(row)
                num_tokens += stop + (1 if ends else 0)
                texts.append(tok.decode(row[:stop], skip_special_tokens=True))
                finishes.append("stop" if ends or stop < sampling.max_tokens else "length")
            replies.append(Reply(texts=texts, finish_reasons=finishes, num_tokens=num_tokens))
        return replies


def load_frozen_model(name_or_path: str, device=None, dtype: torch.dtype | str | None = None, **kwargs):
    """Load a model and tokenizer as a frozen verifier: eval mode, no gradients, left padding.

    Under DeepSpeed ZeRO-3, transformers would shard any model loaded during training (`zero.Init`), and generating
    with a sharded model is a collective that every rank must join. The verifier copy is loaded unsharded instead,
    so each rank can score its own groups independently."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with _without_zero3_init():
        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype or "auto", **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(name_or_path, padding_side="left")
    if device is not None:
        model.to(device)
    model.eval()
    model.requires_grad_(False)
    return model, tokenizer


@contextlib.contextmanager
def _without_zero3_init():
    try:
        from transformers.integrations import deepspeed as hf_ds
    except ImportError:  # pragma: no cover - transformers always ships it
        yield
        return
    saved = getattr(hf_ds, "_hf_deepspeed_config_weak_ref", None)
    hf_ds._hf_deepspeed_config_weak_ref = None
    try:
        yield
    finally:
        hf_ds._hf_deepspeed_config_weak_ref = saved
