"""The transformers backend: a frozen Hugging Face model generating in-process (CPU, tests, small models).

One `generate` call of the pipeline becomes a few `model.generate` calls: requests are grouped by decoding settings
(greedy or sampled, `n`, output constraint), sorted by prompt length so padding stays small, and cut into
micro-batches of `batch_size` prompts. Structured output is enforced with `prefix_allowed_tokens_fn`: guided choice
(verdicts come back as exactly "yes", "no" or "unknown") and JSON objects whose fields are string enums (the
equivalence reply); any other schema is left to the tolerant parser.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from itertools import groupby

import torch

from .base import Reply, Request, Verifier

logger = logging.getLogger(__name__)


def template_of(choices: tuple[str, ...] | None, schema: dict | None) -> list[str | tuple[str, ...]] | None:
    """The reply as a template of literal text and choice slots, when the constraint has that shape: guided choice
    (one slot), or a JSON schema of an object whose required properties are all string enums (the equivalence
    reply). Other schemas return `None`: they are left to the tolerant parser."""
    if choices:
        return [tuple(choices)]
    if not schema or schema.get("type") != "object":
        return None
    props, keys = schema.get("properties", {}), schema.get("required", [])
    if not keys or any("enum" not in props.get(k, {}) for k in keys):
        return None
    template: list[str | tuple[str, ...]] = []
    for n, key in enumerate(keys):
        template += [("{" if n == 0 else ", ") + json.dumps(key) + ': "', tuple(props[key]["enum"])]
        template.append('"')
    template.append("}")
    return template


class _TemplateAutomaton:
    """Token-level constraint for a template: literal pieces are forced token by token, a choice slot allows the
    tokens of any of its options (a trie), and end-of-sequence comes after the last piece. The token sequence may
    differ from how the tokenizer would split the whole text, but it decodes to exactly a valid reply."""

    def __init__(self, tokenizer, template: list[str | tuple[str, ...]], eos_id: int):
        self.eos_id = eos_id
        self.pieces: list[dict] = []  # each piece is a trie: token -> subtrie; {} marks the end of an option
        for piece in template:
            options = [piece] if isinstance(piece, str) else list(piece)
            trie: dict = {}
            for option in options:
                node = trie
                for token in tokenizer(option, add_special_tokens=False)["input_ids"]:
                    node = node.setdefault(token, {})
                node[None] = {}
            self.pieces.append(trie)

    def allowed(self, generated: list[int]) -> list[int]:
        piece, node = 0, self.pieces[0] if self.pieces else {}
        for token in generated:
            while None in node and token not in node:  # an option ended: move on to the next piece
                piece += 1
                if piece == len(self.pieces):
                    return [self.eos_id]
                node = self.pieces[piece]
            if token not in node:
                return [self.eos_id]
            node = node[token]
        allowed = [t for t in node if t is not None]
        if None in node:  # the current option may end here: the next piece may start, or the reply may end
            allowed += [t for t in self.pieces[piece + 1] if t is not None] if piece + 1 < len(self.pieces) else [
                self.eos_id
            ]
        return allowed or [self.eos_id]


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
    supports_structured_output = True  # guided choice, and JSON objects of string enums

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
        self._automata: dict[str, _TemplateAutomaton] = {}

    def _prompt(self, request: Request) -> str:
        return self.tokenizer.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True)

    def _generate(self, requests: list[Request]) -> list[Reply]:
        # Each prompt is tokenized once: its length orders the batches, its ids are padded into them.
        ids = [self.tokenizer(self._prompt(r), add_special_tokens=False)["input_ids"] for r in requests]
        settings = [
            repr((r.sampling, r.choices or (), json.dumps(r.json_schema, sort_keys=True) if r.json_schema else ""))
            for r in requests
        ]
        order = sorted(range(len(requests)), key=lambda k: (settings[k], len(ids[k])))
        replies: list[Reply | None] = [None] * len(requests)
        was_training = self.model.training
        with self.context(), torch.inference_mode():
            self.model.eval()
            try:
                for _, same in groupby(order, key=settings.__getitem__):
                    same = list(same)
                    for start in range(0, len(same), self.batch_size):
                        chunk = same[start : start + self.batch_size]
                        run = self._choice_chunk if _scored_choice(requests[chunk[0]]) else self._generate_chunk
                        for k, reply in zip(chunk, run([ids[k] for k in chunk], requests[chunk[0]])):
                            replies[k] = reply
            finally:
                self.model.train(was_training)
        return replies  # type: ignore[return-value]

    def _choice_chunk(self, prompts: list[list[int]], request: Request) -> list[Reply]:
        choices = list(request.choices or ())
        options = [self.tokenizer(c, add_special_tokens=False)["input_ids"] for c in choices]
        scores = _choice_scores(self.model, self.tokenizer, prompts, options).tolist()
        replies = []
        for row in scores:
            best = max(range(len(choices)), key=row.__getitem__)
            replies.append(
                Reply(
                    texts=[choices[best]],
                    finish_reasons=["stop"],
                    num_tokens=len(options[best]) + 1,
                    choice_logprobs=dict(zip(choices, row)),
                )
            )
        return replies

    def _generate_chunk(self, prompts: list[list[int]], request: Request) -> list[Reply]:
        sampling = request.sampling
        tok = self.tokenizer
        tok.padding_side = "left"
        batch = tok.pad({"input_ids": prompts}, return_tensors="pt").to(self.model.device)
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
        template = template_of(request.choices, request.json_schema)
        if template is not None:
            key = json.dumps(template)
            if key not in self._automata:
                self._automata[key] = _TemplateAutomaton(tok, template, self.eos_ids[0])
            automaton = self._automata[key]
            kwargs["prefix_allowed_tokens_fn"] = lambda _, ids: automaton.allowed(ids[prompt_len:].tolist())
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


def _scored_choice(request: Request) -> bool:
    """Greedy guided choice with one reply: answered by scoring each choice instead of decoding (same verdict for
    single-token choices, plus `Reply.choice_logprobs`)."""
    sampling = request.sampling
    return bool(request.choices) and request.json_schema is None and sampling.greedy and sampling.n == 1


def _choice_scores(model, tokenizer, prompts: list[list[int]], options: list[list[int]]) -> torch.Tensor:
    """Log-probability of each option (summed over its tokens) after each prompt: a `[prompts, options]` tensor.
    Single-token options need one forward pass over the prompts; longer ones one pass over every prompt + option."""
    single = all(len(o) == 1 for o in options)
    seqs = prompts if single else [p + o for p in prompts for o in options]
    tokenizer.padding_side = "left"
    batch = tokenizer.pad({"input_ids": seqs}, return_tensors="pt").to(model.device)
    mask = batch["attention_mask"]
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # left padding: positions count real tokens only
    keep = 1 if single else max(len(o) for o in options) + 1
    logits = model(
        input_ids=batch["input_ids"], attention_mask=mask, position_ids=positions, logits_to_keep=keep
    ).logits
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    if single:
        return logprobs[:, -1, [o[0] for o in options]]
    scores = torch.empty(len(prompts), len(options))
    for b in range(len(seqs)):
        option = options[b % len(options)]
        m = len(option)
        steps = logprobs[b, keep - 1 - m : keep - 1]  # the positions that predict the option's tokens
        picked = steps.gather(1, torch.tensor(option, device=steps.device)[:, None])
        scores[b // len(options), b % len(options)] = picked.sum()
    return scores


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
