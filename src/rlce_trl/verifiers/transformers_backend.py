"""The transformers backend: a frozen Hugging Face model generating in-process (CPU, tests, small models).

One `generate` call of the pipeline is answered without `model.generate` (`kv_decoding.py`): requests are grouped by
decoding settings, then by shared token prefix (a group's sample context), each prefix read ONCE for rows of up to
`batch_size` prompts; closed replies (guided choice: the verdicts; a JSON object of string enums: the equivalence
reply) are decided from the logits at their decision slots, with the choices' log-probabilities
(`Reply.choice_logprobs`); free text is decoded one cached step per token, a `one_line` sample (a test) ending at the
line break after its first non-blank line, all that is read of it.

Every decision is the arg-max over the allowed tokens, as a constrained greedy `generate` takes it, so verdicts and
equivalence decisions are those of `model.generate` (which `shared_prefixes = False` still runs). Sampled replies
under a constraint, models whose generation config adds logits processors and models whose cache `kv_decoding` does
not know (`caches.decoding_path`) go through `model.generate` with `prefix_allowed_tokens_fn`. Hybrid models
(recurrent state in the cache: Qwen3.5, NemotronH, Falcon-H1, LFM2, ...) share prefixes too, each continuation on its
own copy of the prefix state.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable

import torch

from ..generation.caches import UnsupportedCacheError, decoding_path, model_type
from ..generation.hf import eos_token_ids, evaluating, generate_kwargs, load_frozen_model, with_pad_token  # noqa: F401 - load_frozen_model: public here
from ..generation.kv_decoding import (
    PrefixCache,
    Rows,
    Stream,
    Work,
    greedy_walk,
    plan_prefixes,
    prefill_prefix,
    sample_tokens,
)
from .base import Reply, Request, Verifier, VerifierUnavailableError, first_line_ended
from .decisions import enum_fields

#: Generation-config fields that make `generate` add logits processors; a model that sets any of them is answered
#: through `generate` itself, so that its decisions stay exactly `generate`'s.
_PROCESSOR_FIELDS = (
    "no_repeat_ngram_size", "bad_words_ids", "min_length", "min_new_tokens", "suppress_tokens",
    "begin_suppress_tokens", "forced_bos_token_id", "forced_eos_token_id", "sequence_bias", "min_p", "typical_p",
    "epsilon_cutoff", "eta_cutoff", "encoder_repetition_penalty", "exponential_decay_length_penalty",
    "renormalize_logits", "watermarking_config", "guidance_scale", "top_h",
)


def template_of(choices: tuple[str, ...] | None, schema: dict | None) -> list[str | tuple[str, ...]] | None:
    """The reply as a template of literal text and choice slots, when the constraint has that shape: guided choice
    (one slot), or a JSON schema of an object whose required properties are all string enums (the equivalence
    reply). Other schemas return `None`: they are left to the tolerant parser."""
    if choices:
        return [tuple(choices)]
    fields = enum_fields(schema)
    if fields is None:
        return None
    template: list[str | tuple[str, ...]] = []
    for n, (key, options) in enumerate(fields):
        template += [("{" if n == 0 else ", ") + json.dumps(key) + ': "', tuple(options), '"']
    return [*template, "}"]


def settings_key(request: Request) -> str:
    """Requests with the same key decode alike (sampling and constraint) and are answered together."""
    schema = json.dumps(request.json_schema, sort_keys=True) if request.json_schema else ""
    return repr((request.sampling, request.choices or (), schema))


class _TemplateAutomaton:
    """Token-level constraint for a template: literal pieces are forced token by token, a choice slot allows the
    tokens of any of its options (a trie), and end-of-sequence comes after the last piece. The token sequence may
    differ from how the tokenizer would split the whole text, but it decodes to exactly a valid reply."""

    def __init__(self, tokenizer, template: list[str | tuple[str, ...]], eos_id: int,
                 names: list[str | None] | None = None):
        self.eos_id = eos_id
        self.pieces: list[dict] = []  # each piece is a trie: token -> subtrie; {} marks the end of an option
        self.first_tokens: dict[int, dict[int, list[str]]] = {}  # choice piece -> first token -> its options
        self.labels: dict[int, str | None] = {}  # choice piece -> slot name (None: guided choice)
        slot_iter = iter(names or [])
        for index, piece in enumerate(template):
            options = [piece] if isinstance(piece, str) else list(piece)
            trie: dict = {}
            for option in options:
                node = trie
                tokens = tokenizer(option, add_special_tokens=False)["input_ids"]
                for token in tokens:
                    node = node.setdefault(token, {})
                node[None] = {}
                if not isinstance(piece, str) and tokens:
                    self.first_tokens.setdefault(index, {}).setdefault(tokens[0], []).append(option)
            if not isinstance(piece, str):
                self.labels[index] = next(slot_iter, None)
            self.pieces.append(trie)

    def _walk(self, generated: list[int]) -> tuple[int, dict, int] | None:
        """(piece, trie node, tokens taken inside the piece) after `generated`; `None` past the end or off the
        template."""
        piece, node, depth = 0, self.pieces[0] if self.pieces else {}, 0
        for token in generated:
            while None in node and token not in node:  # an option ended: move on to the next piece
                piece += 1
                if piece == len(self.pieces):
                    return None
                node, depth = self.pieces[piece], 0
            if token not in node:
                return None
            node, depth = node[token], depth + 1
        return piece, node, depth

    def allowed(self, generated: list[int]) -> list[int]:
        state = self._walk(generated)
        if state is None:
            return [self.eos_id]
        piece, node, _ = state
        allowed = [t for t in node if t is not None]
        if None in node:  # the current option may end here: the next piece may start, or the reply may end
            following = self.pieces[piece + 1] if piece + 1 < len(self.pieces) else {self.eos_id: {}}
            allowed += [t for t in following if t is not None]
        return allowed or [self.eos_id]

    def slot_entered(self, generated: list[int], token: int) -> int | None:
        """The choice piece that `token` opens after `generated` (its first token), else `None`."""
        state = self._walk([*generated, token])
        if state is None:
            return None
        piece, _, depth = state
        return piece if piece in self.first_tokens and depth == 1 else None

    def slot_key(self, piece: int, option: str) -> str:
        label = self.labels.get(piece)
        return option if label is None else f"{label}={option}"


class FrozenModelVerifier(Verifier):
    """What the transformers backends share: a frozen model (frozen here unless `context` is given), its tokenizer
    with a pad token, micro-batches of `batch_size`, the constraint automata of closed requests."""

    supports_structured_output = True  # guided choice, and JSON objects of string enums

    def __init__(self, model, tokenizer, batch_size: int,
                 context: Callable[[], contextlib.AbstractContextManager] | None):
        super().__init__()
        self.model, self.tokenizer, self.batch_size = model, with_pad_token(tokenizer), batch_size
        self.context = context or contextlib.nullcontext
        if context is None:  # a dedicated frozen copy: freeze it once
            model.eval().requires_grad_(False)
        self.eos_ids = eos_token_ids(model, tokenizer)
        self._automata: dict[str, _TemplateAutomaton] = {}

    def _automaton(self, request: Request) -> _TemplateAutomaton | None:
        """The constraint of a closed request (`None`: free text), built once per shape. Its slots are named `None`
        for guided choice, by the JSON field for an object of enums (the keys of `Reply.choice_logprobs`)."""
        template = template_of(request.choices, request.json_schema)
        if template is None:
            return None
        names = [None] if request.choices else list(request.json_schema["required"])
        key = json.dumps([template, names])
        if key not in self._automata:
            self._automata[key] = _TemplateAutomaton(self.tokenizer, template, self.eos_ids[0], names)
        return self._automata[key]

    def _generate_batch(self, batch, request: Request, **extra) -> list[Reply]:
        """`model.generate` over a left-padded `batch` of prompts with `request`'s settings and constraint (`extra`:
        more `generate` arguments): `sampling.n` texts per prompt, each up to its first end token, with its finish
        reason and generated-token count (the end token included)."""
        sampling, tokenizer, eos_ids = request.sampling, self.tokenizer, self.eos_ids
        prompt_len = batch["input_ids"].shape[1]
        kwargs = {**generate_kwargs(sampling, tokenizer.pad_token_id, eos_ids), **extra}
        if (automaton := self._automaton(request)) is not None:
            kwargs["prefix_allowed_tokens_fn"] = lambda _, ids: automaton.allowed(ids[prompt_len:].tolist())
        # a whole, unsharded copy that each rank drives on its own groups: never the per-token all-reduce that
        # transformers turns on whenever ZeRO-3 is enabled (the ranks' calls would not line up: a hang)
        output = self.model.generate(**batch, **kwargs, synced_gpus=False)[:, prompt_len:]
        replies = []
        for i in range(batch["input_ids"].shape[0]):
            texts, finishes, num_tokens = [], [], 0
            for row in output[i * sampling.n : (i + 1) * sampling.n].tolist():
                ends = [p for p, t in enumerate(row) if t in eos_ids]
                stop = ends[0] if ends else len(row)
                num_tokens += stop + (1 if ends else 0)
                texts.append(tokenizer.decode(row[:stop], skip_special_tokens=True))
                finishes.append("stop" if ends or stop < sampling.max_tokens else "length")
            replies.append(Reply(texts=texts, finish_reasons=finishes, num_tokens=num_tokens))
        return replies


class TransformersVerifier(FrozenModelVerifier):
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

    def __init__(
        self,
        model,
        tokenizer,
        batch_size: int = 16,
        context: Callable[[], contextlib.AbstractContextManager] | None = None,
    ):
        super().__init__(model, tokenizer, batch_size, context)
        #: Read shared prompt prefixes once and closed decisions at their slots (False: every request through
        #: `model.generate`, the previous behaviour, kept for comparisons).
        self.shared_prefixes = True
        #: Token accounting of the last `generate` call (prefill, padding, decode steps), for benchmarks.
        self.last_work = Work()
        self._line_break_ids: set[int] | None = None
        #: Prompt-prefix tokens whose keys and values a session keeps across calls (0: none kept).
        self.prefix_cache_tokens = 16384
        self._prefixes: PrefixCache | None = None
        #: How requests are decoded (`caches.DECODING_PATHS`), read from the cache the model's config builds.
        self.decoding_path = decoding_path(model)

    @contextlib.contextmanager
    def session(self):
        """Prompt prefixes read inside (the system prompt and each sample context) are read once for all the
        session's calls, up to `prefix_cache_tokens` tokens kept."""
        if self._prefixes is not None or not self.prefix_cache_tokens:  # nested: the outer session keeps them
            yield self
            return
        self._prefixes = PrefixCache(self.prefix_cache_tokens)
        try:
            yield self
        finally:
            self._prefixes = None

    def _prompt(self, request: Request) -> str:
        return self.tokenizer.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True)

    def _generate(self, requests: list[Request]) -> list[Reply]:
        ids = [self.tokenizer(self._prompt(r), add_special_tokens=False)["input_ids"] for r in requests]
        settings = [settings_key(r) for r in requests]
        replies: list[Reply | None] = [None] * len(requests)
        self.last_work = Work()
        try:
            with self.context(), torch.inference_mode(), evaluating(self.model):
                for key in dict.fromkeys(settings):
                    same = [k for k in range(len(requests)) if settings[k] == key]
                    request = requests[same[0]]
                    if self._fast_path(request):
                        self._generate_shared(ids, same, request, replies)
                        continue
                    same.sort(key=lambda k: len(ids[k]))  # the generate path: short prompts together, less padding
                    for start in range(0, len(same), self.batch_size):
                        chunk = same[start : start + self.batch_size]
                        chunk_replies = self._generate_chunk([ids[k] for k in chunk], request)
                        for k, reply in zip(chunk, chunk_replies, strict=True):
                            replies[k] = reply
        except UnsupportedCacheError as error:  # one line naming the model type and the way out, not transformers'
            raise VerifierUnavailableError(
                f"The transformers verifier cannot decode with this {model_type(self.model)} model's cache "
                f"({error}); serve the verifier with vLLM instead (verifier_mode: server, `vllm serve <checkpoint>`)."
            ) from error
        return replies  # type: ignore[return-value]

    def _fast_path(self, request: Request) -> bool:
        """Whether the request is answered over shared KV caches, not `model.generate` (see the module docstring)."""
        if not self.shared_prefixes or self.decoding_path == "generate":
            return False
        config = self.model.generation_config
        plain = (getattr(config, "repetition_penalty", None) in (None, 1.0)) and not any(
            getattr(config, name, None) for name in _PROCESSOR_FIELDS
        )
        return plain and (request.sampling.greedy or template_of(request.choices, request.json_schema) is None)

    def _generate_shared(self, ids: list[list[int]], members: list[int], request: Request, replies: list) -> None:
        """Answer `members` (same settings): each shared prefix is read once and rows continue from it, up to
        `batch_size` prompts at a time; closed replies read logits only at their decision slots, free text streams
        (a new prompt joins as soon as rows have ended, so the batch stays full)."""
        sampling, work = request.sampling, self.last_work
        automaton = self._automaton(request)
        clusters = plan_prefixes(ids, members)
        plan = [(c, k) for c, (_, ms) in enumerate(clusters) for k in sorted(ms, key=lambda k: len(ids[k]))]
        last_use = {c: i for i, (c, _) in enumerate(plan)}
        kv: dict[int, list] = {}
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_ids[0]
        repeat = 1 if sampling.greedy else sampling.n
        recurrent = self.decoding_path == "recurrent"

        def start(first: int, count: int):
            """Rows for `plan[first : first + count]`, their prompts fed: `(rows, logits)`. A recurrent model's
            prompts are fed one at a time (each on its own copy of its prefix state), then joined."""
            chunk = plan[first : first + count]
            for c, _ in chunk:
                if c not in kv:
                    length, head = clusters[c][0], clusters[c][1][0]
                    kv[c] = prefill_prefix(self.model, ids[head][:length], work, self._prefixes, recurrent)
            if recurrent:
                rows, logits = None, []
                for c, k in chunk:
                    row = Rows(self.model, [(kv[c], clusters[c][0])], pad_id, work, recurrent=True)
                    logits.append(row.feed([ids[k][clusters[c][0]:]], kind="prompt"))
                    rows = row if rows is None else (rows.extend(row) or rows)
                logits = torch.cat(logits)
            else:
                rows = Rows(self.model, [(kv[c], clusters[c][0]) for c, _ in chunk], pad_id, work)
                logits = rows.feed([ids[k][clusters[c][0]:] for c, k in chunk], kind="prompt")
            for c in {c for c, _ in chunk}:
                if last_use[c] < first + count:
                    del kv[c]  # every member of this cluster has its rows: free the prefix
            return rows, logits

        def answer(k: int, results: list) -> None:
            mine = results * (sampling.n if repeat == 1 else 1)
            replies[k] = Reply(
                texts=[self.tokenizer.decode(d.tokens, skip_special_tokens=True) for d in mine],
                finish_reasons=[d.finish for d in mine],
                num_tokens=sum(len(d.tokens) + d.ended_with_eos for d in mine),
                choice_logprobs=mine[0].logprobs if automaton is not None else None,
            )

        if automaton is not None:
            # forced text differs in length between rows: a recurrent model walks each reply alone
            width = 1 if recurrent else self.batch_size
            for first in range(0, len(plan), width):
                rows, logits = start(first, width)
                chunk = plan[first : first + width]
                results = greedy_walk(rows, logits, [automaton] * len(chunk), sampling.max_tokens, self.eos_ids)
                for (_, k), result in zip(chunk, results, strict=True):
                    answer(k, [result])
            return
        pick = (lambda x: torch.argmax(x, dim=-1)) if sampling.greedy else (
            lambda x, s=sampling: sample_tokens(x, s.temperature, s.top_k or None, s.top_p))
        stream = Stream(sampling.max_tokens, self.eos_ids, pick, self._line_stop() if sampling.one_line else None)
        done: dict[int, list] = {}
        queued = 0
        while queued < len(plan) or len(stream):
            room = self.batch_size - -(-len(stream) // repeat)  # prompts that fit beside the running rows
            # refill once a quarter of the batch is free (each join copies the running cache once)
            if queued < len(plan) and room >= min(max(1, self.batch_size // 4), len(plan) - queued):
                count = min(room, len(plan) - queued)
                rows, logits = start(queued, count)
                rows.repeat(repeat)
                stream.add(rows, logits.repeat_interleave(repeat, dim=0),
                           [(k, j) for _, k in plan[queued : queued + count] for j in range(repeat)])
                queued += count
            for (k, j), decoded in stream.step():
                done.setdefault(k, [None] * repeat)[j] = decoded
                if all(d is not None for d in done[k]):
                    answer(k, done[k])

    def _line_stop(self):
        """`stop(tokens)` for one-line replies: the first non-blank line has ended (checked on the decoded text, and
        only after a token whose text holds a line break; those token ids are found once per tokenizer)."""
        if self._line_break_ids is None:
            pieces = self.tokenizer.batch_decode([[i] for i in range(len(self.tokenizer))])
            self._line_break_ids = {i for i, piece in enumerate(pieces) if "".join(piece.splitlines()) != piece}
        breaks, tok = self._line_break_ids, self.tokenizer
        return lambda tokens: tokens[-1] in breaks and first_line_ended(tok.decode(tokens, skip_special_tokens=True))

    def _generate_chunk(self, prompts: list[list[int]], request: Request) -> list[Reply]:
        self.tokenizer.padding_side = "left"
        batch = self.tokenizer.pad({"input_ids": prompts}, return_tensors="pt").to(self.model.device)
        return self._generate_batch(batch, request)
