"""Decoding pieces of the transformers backend: shared prompt prefixes read once, ragged batches over one KV cache,
closed decisions read from the logits at their slot, and free text streamed one cached step per token.

```
 prompts (token ids) ─► plan_prefixes: sort, cut into clusters sharing a long prefix (a group's sample context)
                     ─► prefill each cluster's prefix ONCE (batch 1, no padding), continuing the
                        session's PrefixCache (earlier stages of the step read the same context) [prefill_prefix]
 batch of rows       ─► Rows: each row's prefix KV left-padded to the longest, masked;
                        row tokens fed with masked pads in the middle; positions continue each row's own prefix
                     ─► greedy_walk (closed replies: only decision slots read logits, forced text fed in one go)
                        or Stream (free text, greedy or sampled: one cached step per token, finished rows dropped,
                        a one-line reply ended at its first line break)
```

Models whose cache holds recurrent or convolution state beside keys and values (hybrids: Qwen3.5's Gated DeltaNet,
NemotronH's and Falcon-H1's Mamba, LFM2's convolutions; `decoding_path(model) == "recurrent"`) share prefixes too,
each continuation on its own copy of the prefix state (recurrent state is updated in place and cannot be cut back to
a shorter prefix), their prompts fed one at a time ([`Rows`]). Which kind a model's cache is, and the helpers that
build it, live in [`rlce_trl.generation.caches`].

Nothing here changes what is decided: a decision is the arg-max over the allowed tokens of the logits at its slot,
exactly as a constrained `generate` takes it; only the work around it (recomputing the shared context, decoding
forced text token by token, padding, finished rows) is gone.
"""

from __future__ import annotations

import time
from copy import deepcopy
from dataclasses import dataclass, field
from os.path import commonprefix

import torch

from .caches import cache_kwarg, forward, kv_layers, map_batch, new_cache


def plan_prefixes(ids: list[list[int]], indices: list[int], min_shared: float = 0.5) -> list[tuple[int, list[int]]]:
    """Cut `indices` into clusters of prompts sharing a long token prefix: `[(prefix_len, members)]`.

    Prompts are sorted by their ids, so prompts with the same sample context sit together; a new cluster starts
    when a prompt shares less than `min_shared` of the shorter prompt with its neighbour. The prefix of a cluster is
    the common prefix of all its members, cut so that every member keeps at least one token of its own (the token
    whose logits start the reply)."""
    order = sorted(indices, key=lambda k: ids[k])
    clusters: list[tuple[int, list[int]]] = []
    for k in order:
        if clusters:
            prefix, members = clusters[-1]
            shared = len(commonprefix([ids[members[-1]], ids[k]]))
            if shared >= max(1, min_shared * min(len(ids[members[-1]]), len(ids[k]))):
                members.append(k)
                clusters[-1] = (min(prefix, shared, len(ids[k]) - 1), members)
                continue
        clusters.append((len(ids[k]) - 1, [k]))
    return clusters


@dataclass
class Work:
    """Token accounting of a call: tokens run through the model, the masked pads among them, and decode steps."""

    prefill_tokens: int = 0
    pad_tokens: int = 0
    decode_steps: int = 0
    reused_tokens: int = 0  # prefix tokens served from a `PrefixCache` instead of being read again
    by_kind: dict[str, int] = field(default_factory=dict)  # real tokens fed: prompt tails, decisions, decode
    seconds_by_kind: dict[str, float] = field(default_factory=dict)


class PrefixCache:
    """Keys and values of prompt prefixes kept across the calls of one session (`Verifier.session`: the stages of a
    reward step read the same system prompt and sample contexts). A prefix continues the cached entry sharing the
    longest token prefix with it; least recently used entries go beyond `max_tokens` cached tokens.

    An entry of a recurrent model is its whole cache after the entry's tokens: it serves only prefixes that hold all
    of those tokens (its state cannot be cut back to fewer), and each use gets its own copy."""

    def __init__(self, max_tokens: int):
        self.max_tokens = max_tokens
        self.entries: dict[tuple[int, ...], list[tuple[torch.Tensor, torch.Tensor]] | object] = {}  # LRU order

    def longest(self, ids: list[int]) -> tuple[int, list[tuple[torch.Tensor, torch.Tensor]] | object]:
        best, kv, hit = 0, None, None
        for key, layers in self.entries.items():
            shared = len(commonprefix([list(key), ids]))
            if not isinstance(layers, list) and shared < len(key):
                continue
            if shared > best:
                best, kv, hit = shared, layers, key
        if not best:
            return 0, []
        self.entries[hit] = self.entries.pop(hit)  # most recently used last
        if not isinstance(kv, list):
            return best, deepcopy(kv)  # a continuation updates its recurrent state in place
        return best, [(k[:, :, :best], v[:, :, :best]) for k, v in kv]

    def put(self, ids: list[int], kv: list[tuple[torch.Tensor, torch.Tensor]] | object) -> None:
        if not ids or len(ids) > self.max_tokens:
            return
        self.entries[tuple(ids)] = kv
        while sum(map(len, self.entries)) > self.max_tokens:
            del self.entries[next(iter(self.entries))]


def prefill_prefix(model, ids: list[int], work: Work, cache: PrefixCache | None = None, recurrent: bool = False):
    """Run a prefix once (batch 1, no padding), continuing what `cache` holds of it; return its keys and values
    per layer, or (`recurrent`: a model whose cache holds recurrent state) the whole cache after it, which the
    caller copies for each continuation."""
    from transformers import DynamicCache

    start, cached = cache.longest(ids) if cache is not None else (0, [])  # at most len(ids): a shared prefix
    if recurrent:
        kv = cached if start else new_cache(model)
    else:
        kv = DynamicCache(ddp_cache_data=[(k[:, :, :start], v[:, :, :start]) for k, v in cached]) if start else \
            DynamicCache()
    if len(ids) > start:
        forward(model, input_ids=torch.tensor([ids[start:]], device=model.device), **{cache_kwarg(model): kv},
                use_cache=True, logits_to_keep=1)
        work.prefill_tokens += len(ids) - start
    work.reused_tokens += start
    if not recurrent:
        kv = [(layer.keys, layer.values) for layer in kv.layers] if ids else []
    if cache is not None:
        cache.put(ids, kv)
    return kv


class Rows:
    """A batch of rows continuing their own cached prefixes in one KV cache.

    Row `b` holds `[pad ... pad][prefix_b][tokens fed so far, with masked pads in between]`. Pads are never
    attended to, and every real token gets the position it would have in the row's unpadded prompt, so each row's
    logits are those of its own prompt alone.

    `recurrent`: the model's cache holds recurrent state (`prefill_prefix(..., recurrent=True)` gave the prefix);
    the row is then one prompt alone, continuing its own copy of the prefix state. Such rows join others through
    `extend` once their prompts are fed; only single-token steps ([`Stream`]) run them together."""

    def __init__(self, model, prefixes: list[tuple[list[tuple[torch.Tensor, torch.Tensor]], int]], pad_id: int,
                 work: Work, recurrent: bool = False):
        from transformers import DynamicCache

        self.model, self.pad_id, self.work = model, pad_id, work
        self.cache_kwarg = cache_kwarg(model)
        device = model.device
        if recurrent and len(prefixes) != 1:
            raise ValueError("a recurrent model's rows start one prompt at a time (a pad would move its state)")
        longest = max(length for _, length in prefixes)
        self.mask = torch.zeros(len(prefixes), longest, dtype=torch.long, device=device)
        for b, (_, length) in enumerate(prefixes):
            self.mask[b, longest - length:] = 1
        self.next_pos = torch.tensor([length for _, length in prefixes], dtype=torch.long, device=device)
        if recurrent:
            state, length = prefixes[0]
            self.cache = deepcopy(state) if length else new_cache(model)
            return
        self.cache = DynamicCache()
        if longest:
            model_kv = next(kv for kv, length in prefixes if length)

            def padded(layer: int, part: int) -> torch.Tensor:
                """Every row's keys (`part` 0) or values (1) of `layer`, left-padded to the longest prefix."""
                empty = model_kv[layer][part][:, :, :0]
                return torch.cat([torch.nn.functional.pad(kv[layer][part] if length else empty,
                                                          (0, 0, longest - length, 0)) for kv, length in prefixes])

            self.cache = DynamicCache(ddp_cache_data=[(padded(i, 0), padded(i, 1)) for i in range(len(model_kv))])

    def __len__(self) -> int:
        return self.mask.shape[0]

    def feed(self, tokens: list[list[int]], kind: str = "decode") -> torch.Tensor:
        """Append `tokens[b]` (at least one) to row `b`; return the logits after each row's last token, (B, V)."""
        width = max(len(t) for t in tokens)
        device = self.mask.device
        ids = torch.full((len(tokens), width), self.pad_id, dtype=torch.long, device=device)
        new_mask = torch.zeros(len(tokens), width, dtype=torch.long, device=device)
        lengths = torch.tensor([len(t) for t in tokens], dtype=torch.long, device=device)
        for b, row in enumerate(tokens):
            ids[b, width - len(row):] = torch.tensor(row, dtype=torch.long, device=device)
            new_mask[b, width - len(row):] = 1
        offsets = torch.arange(width, device=device)[None, :] - (width - lengths)[:, None]
        positions = (self.next_pos[:, None] + offsets).clamp(min=0)
        self.mask = torch.cat([self.mask, new_mask], dim=1)
        start = time.perf_counter()
        out = forward(self.model, input_ids=ids, attention_mask=self.mask, position_ids=positions, use_cache=True,
                      logits_to_keep=1, **{self.cache_kwarg: self.cache})
        self.next_pos = self.next_pos + lengths
        real = int(lengths.sum())
        self.work.prefill_tokens += ids.numel()
        self.work.pad_tokens += ids.numel() - real
        self.work.by_kind[kind] = self.work.by_kind.get(kind, 0) + real
        self.work.seconds_by_kind[kind] = self.work.seconds_by_kind.get(kind, 0.0) + time.perf_counter() - start
        if kind == "decode":
            self.work.decode_steps += 1
        return out.logits[:, -1].float()

    def keep(self, rows: list[int]) -> None:
        """Drop every row not in `rows` (finished ones), so that later steps compute nothing for them, and the
        leading cache columns that no remaining row attends to."""
        if len(rows) == len(self):
            return
        index = torch.tensor(rows, dtype=torch.long, device=self.mask.device)
        map_batch([self.cache], lambda rows: rows.index_select(0, index))
        self.mask, self.next_pos = self.mask[index], self.next_pos[index]
        first = int(self.mask.any(0).long().argmax())
        if first:
            self.mask = self.mask[:, first:]
            for layer in kv_layers(self.cache):
                layer.keys, layer.values = layer.keys[:, :, first:], layer.values[:, :, first:]

    def extend(self, other: Rows) -> None:
        """Append `other`'s rows (the batch refilled while it runs): both caches left-padded to the longer, masked."""
        width = max(self.mask.shape[1], other.mask.shape[1])
        for rows in (self, other):
            pad = width - rows.mask.shape[1]
            if pad:
                rows.mask = torch.nn.functional.pad(rows.mask, (pad, 0))
                for layer in kv_layers(rows.cache):
                    layer.keys = torch.nn.functional.pad(layer.keys, (0, 0, pad, 0))
                    layer.values = torch.nn.functional.pad(layer.values, (0, 0, pad, 0))
        map_batch([self.cache, other.cache], lambda mine, theirs: torch.cat([mine, theirs]))
        self.mask = torch.cat([self.mask, other.mask])
        self.next_pos = torch.cat([self.next_pos, other.next_pos])

    def repeat(self, n: int) -> None:
        """Each row becomes `n` consecutive rows (independent samples of one prompt)."""
        if n > 1:
            map_batch([self.cache], lambda rows: rows.repeat_interleave(n, dim=0))
            self.mask = self.mask.repeat_interleave(n, dim=0)
            self.next_pos = self.next_pos.repeat_interleave(n, dim=0)


@dataclass
class Decoded:
    tokens: list[int] = field(default_factory=list)
    finish: str = "length"
    ended_with_eos: bool = False
    logprobs: dict[str, float] | None = None


def greedy_walk(rows: Rows, logits: torch.Tensor, automata: list, max_tokens: int,
                eos_ids: list[int]) -> list[Decoded]:
    """Greedy constrained decoding of closed replies, reading logits only where the reply has a choice.

    At each decision the token is the arg-max of the logits over the allowed tokens (lowest id on a tie, as
    `argmax` over a masked vocabulary gives); the forced text that follows (a JSON key, the closing quote) is
    appended without asking the model and fed together with the decision in one forward. The log-probabilities of
    each option's first token are kept at every slot where an option is chosen."""
    out = [Decoded(logprobs={}) for _ in automata]
    active = list(range(len(automata)))
    while active:
        feeds, still = [], []
        for b, row in enumerate(active):
            automaton, result = automata[row], out[row]
            allowed = sorted(automaton.allowed(result.tokens))
            if len(allowed) > 1:
                scores = logits[b, allowed]
                token = allowed[int(torch.argmax(scores))]
                slot = automaton.slot_entered(result.tokens, token)
                if slot is not None:
                    logp = torch.log_softmax(logits[b], dim=-1)
                    for first, options in automaton.first_tokens[slot].items():
                        for option in options:
                            result.logprobs[automaton.slot_key(slot, option)] = float(logp[first])
            else:
                token = allowed[0]
            fed: list[int] = []
            while True:
                if token in eos_ids:
                    result.finish, result.ended_with_eos = "stop", True
                    break
                result.tokens.append(token)
                fed.append(token)
                if len(result.tokens) >= max_tokens:
                    result.finish = "length"
                    break
                allowed = automaton.allowed(result.tokens)
                if len(allowed) > 1:
                    break
                token = allowed[0]
            if not result.ended_with_eos and len(result.tokens) < max_tokens:
                feeds.append(fed)
                still.append(row)
        if not still:
            break
        rows.keep([active.index(row) for row in still])
        active = still
        logits = rows.feed(feeds, kind="decision")
    return out


def sample_tokens(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float) -> torch.Tensor:
    """One token per row, as `generate(do_sample=True)` draws it: temperature, then top-k, then top-p."""
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    scores = logits
    if temperature != 1.0:
        scores = TemperatureLogitsWarper(temperature)(None, scores)
    if top_k:
        scores = TopKLogitsWarper(top_k)(None, scores)
    if top_p < 1.0:
        scores = TopPLogitsWarper(top_p)(None, scores)
    return torch.multinomial(torch.softmax(scores, dim=-1), num_samples=1).squeeze(1)


class Stream:
    """Free-text rows decoding together, one cached forward step per token for the rows still running. Rows join
    while others run (`add`: the caller refills the batch as rows end). `pick(logits)` returns one token per row
    (arg-max, or a sample); a row ends at an end token, at `max_tokens`, or ("stop") once `stop(tokens)` holds."""

    def __init__(self, max_tokens: int, eos_ids: list[int], pick, stop=None):
        self.max_tokens, self.eos, self.pick, self.stop = max_tokens, set(eos_ids), pick, stop
        self.rows: Rows | None = None
        self.logits: torch.Tensor | None = None
        self.running: list[tuple[object, Decoded]] = []  # (owner, reply so far) per row

    def __len__(self) -> int:
        return len(self.running)

    def add(self, rows: Rows, logits: torch.Tensor, owners) -> None:
        """Rows whose prompts were just fed (`logits`: after each prompt's last token), one owner per row."""
        if self.rows is None:
            self.rows, self.logits = rows, logits
        else:
            self.rows.extend(rows)
            self.logits = torch.cat([self.logits, logits])
        self.running += [(owner, Decoded()) for owner in owners]

    def step(self) -> list[tuple[object, Decoded]]:
        """One token for every running row; returns the rows that ended, as `(owner, Decoded)`."""
        tokens = self.pick(self.logits).tolist()
        ended, still = [], []
        for b, ((owner, out), token) in enumerate(zip(self.running, tokens, strict=True)):
            if token in self.eos:
                out.finish, out.ended_with_eos = "stop", True
            else:
                out.tokens.append(token)
                if self.stop is not None and self.stop(out.tokens):
                    out.finish = "stop"
                elif len(out.tokens) < self.max_tokens:
                    still.append(b)
                    continue
            ended.append((owner, out))
        self.running = [self.running[b] for b in still]
        if still:
            self.rows.keep(still)
            self.logits = self.rows.feed([[out.tokens[-1]] for _, out in self.running], kind="decode")
        else:
            self.rows = self.logits = None
        return ended

