"""Closed decisions over an OpenAI-compatible server in as few generated tokens as the API allows.

A greedy guided-choice request (a verdict) needs one generated token: the server's constrained arg-max picks the
token that starts one choice, and the rest of the choice is forced. It is sent with `max_tokens=1` and the top
log-probabilities of that token, and the choice that this token starts is the reply.

A greedy JSON object of string enums (the equivalence reply) is decided one field at a time: round `k` continues the
assistant message with the compact JSON written so far (`{"P1":"same","P2":"`, vLLM's
`continue_final_message`), as guided choice over the field's enum with `max_tokens=1`; all groups' round-`k`
requests go out together. One generated token per pair instead of the whole JSON document. The layout is the one
vLLM's constrained decoder writes without free whitespace (the co-located server's `disable_any_whitespace`).

Any reply that cannot be read this way (a first token shared by two choices, a server that ignores the constraint)
is answered by sending the original request unchanged, so the decision never gets worse than the full reply's.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from .base import Reply, Request, Sampling

#: top log-probabilities asked for at the decision token (vLLM's default cap, `--max-logprobs`, is 20)
TOP_LOGPROBS = 20


def enum_fields(schema: dict | None) -> list[tuple[str, list[str]]] | None:
    """`[(field, options)]` of a JSON-object-of-enums schema (every required field an enum of strings), else None."""
    if not schema or schema.get("type") != "object":
        return None
    props, keys = schema.get("properties", {}), schema.get("required", [])
    if not keys or any(not all(isinstance(o, str) for o in props.get(k, {}).get("enum", [None])) for k in keys):
        return None
    return [(key, list(props[key]["enum"])) for key in keys]


def _decision_request(original: Request, options: list[str], continuation: str | None) -> Request:
    """One decision of `original`: its messages and its clips (`media`: the verifier sees what the full request
    shows), one generated token over `options`, continuing the assistant message `continuation` when given."""
    request = Request(messages=list(original.messages), sampling=Sampling(max_tokens=1), choices=tuple(options),
                      stage=original.stage, media=original.media)
    extra: dict = {"logprobs": True, "top_logprobs": TOP_LOGPROBS}
    if continuation is not None:
        request.messages.append({"role": "assistant", "content": continuation})
        extra.update(continue_final_message=True, add_generation_prompt=False)
    request.payload_extra = extra  # type: ignore[attr-defined]  (read by ServerVerifier._payload)
    return request


def _read(reply: Reply, options: list[str]) -> tuple[str | None, dict[str, float]]:
    """The option the one generated token starts (None if it starts none or several), and the options' logprobs
    (the longest top-logprob token that starts each option; options not among the top tokens are left out)."""
    logprobs: dict[str, float] = {}
    for option in options:
        starts = [t for t in (reply.choice_logprobs or {}) if t and option.startswith(t)]
        if starts:
            logprobs[option] = (reply.choice_logprobs or {})[max(starts, key=len)]
    if reply.error is not None or not reply.texts:
        return None, logprobs
    token = reply.texts[0]
    matching = [o for o in options if token and o.startswith(token)]
    return (matching[0] if len(matching) == 1 else None), logprobs


def decide(requests: list[Request], send: Callable[[list[Request]], list[Reply]]) -> list[Reply]:
    """Answer `requests` through `send` (one batched round trip per call), as the module docstring describes."""
    replies: list[Reply | None] = [None] * len(requests)
    # the closed decisions of each request, in order: a verdict is one unnamed slot whose choice is the whole reply
    slots: dict[int, list[tuple[str | None, list[str]]]] = {
        k: [(None, list(r.choices))] for k, r in enumerate(requests)
        if r.sampling.greedy and r.choices and r.json_schema is None
    }
    slots.update({k: f for k, r in enumerate(requests)
                  if r.sampling.greedy and not r.choices and (f := enum_fields(r.json_schema))})
    decided: dict[int, dict[str | None, str]] = {k: {} for k in slots}
    logprobs: dict[int, dict[str, float]] = {k: {} for k in slots}
    tokens = dict.fromkeys(slots, 0)
    fallback: list[int] = []
    # round 0: every open request as it is, and the first decision of every closed one
    plain, pending = [k for k in range(len(requests)) if k not in slots], list(slots)
    while plain or pending:
        batch = [requests[k] for k in plain]
        for k in pending:
            key, options = slots[k][len(decided[k])]
            written = "".join(f"{json.dumps(f)}:{json.dumps(v)}," for f, v in decided[k].items())
            continuation = None if key is None else "{" + written + json.dumps(key) + ':"'
            batch.append(_decision_request(requests[k], options, continuation))
        answers = send(batch)
        if len(answers) != len(batch):
            raise ValueError(f"the verifier answered {len(answers)} of {len(batch)} requests")
        for k, reply in zip(plain, answers, strict=False):
            replies[k] = reply
        still = []
        for k, reply in zip(pending, answers[len(plain):], strict=True):
            key, options = slots[k][len(decided[k])]
            option, scores = _read(reply, options)
            if reply.error is not None:  # the server failed: no second try here (the transport retried already)
                replies[k] = Reply.failed(requests[k].sampling.n, reply.error)
                continue
            if option is None:
                fallback.append(k)
                continue
            decided[k][key] = option
            logprobs[k].update({o if key is None else f"{key}={o}": v for o, v in scores.items()})
            tokens[k] += reply.num_tokens
            if len(decided[k]) < len(slots[k]):
                still.append(k)
                continue
            n = requests[k].sampling.n
            text = option if key is None else json.dumps(decided[k], separators=(",", ":"))
            replies[k] = Reply([text] * n, ["stop"] * n, tokens[k] * n, choice_logprobs=logprobs[k])
        plain, pending = [], still
    if fallback:
        for k, reply in zip(fallback, send([requests[k] for k in fallback]), strict=True):
            replies[k] = reply
    return replies  # type: ignore[return-value]
