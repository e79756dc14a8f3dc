"""ScriptedVerifier: a FAKE verifier backend whose replies the test chooses. It exists to test the method as
arithmetic (which requests are made, how replies are read); real backends are tested against real models."""

from __future__ import annotations

import re

from rlce_trl.verifiers.base import Reply, Request, Verifier


class ScriptedVerifier(Verifier):
    """`reply(request) -> str | list[str]`: the text(s) for one request (a str is repeated `n` times)."""

    name = "scripted"

    def __init__(self, reply):
        super().__init__()
        self.reply = reply
        self.batches: list[list[Request]] = []

    def _generate(self, requests):
        self.batches.append(requests)
        replies = []
        for request in requests:
            texts = self.reply(request)
            texts = [texts] * request.sampling.n if isinstance(texts, str) else list(texts)
            replies.append(Reply(texts=texts, finish_reasons=["stop"] * len(texts), num_tokens=len(texts)))
        return replies


def answers_of(request: Request) -> tuple[str, str] | tuple[str]:
    """The candidate answer(s) named in a construction request."""
    text = request.messages[-1]["content"]
    pair = re.search(r"Answer A: (.*)\nAnswer B: (.*)\n", text)
    if pair:
        return pair.group(1), pair.group(2)
    return (re.search(r"candidate answer to the final request in the input is: (.*)\n", text).group(1),)


def claim_of(request: Request) -> str:
    return re.search(r"Claim: (.*)\n", request.messages[-1]["content"]).group(1)


def evidence_verifier(verdicts: dict, equivalent: set = frozenset()):
    """Construction writes the test "A>B" for a pair; validation answers `verdicts["A>B"]` (a str, or a list consumed
    in order for repeated tests, default "unknown"); equivalence calls the pairs in `equivalent` ("A=B") "same"."""
    remaining = {k: list(v) if isinstance(v, list) else v for k, v in verdicts.items()}

    def reply(request: Request):
        if request.stage == "construction":
            answers = answers_of(request)
            return f"{answers[0]}>{answers[1]}" if len(answers) == 2 else f"{answers[0]}+"
        if request.stage == "validation":
            claim = claim_of(request)
            value = remaining.get(claim, "unknown")
            return value.pop(0) if isinstance(value, list) else value
        if request.stage == "equivalence":
            listed = dict(re.findall(r"^(\d+)\. (.*)$", request.messages[-1]["content"], flags=re.M))
            pairs = re.findall(r"^P(\d+): (\d+) and (\d+)$", request.messages[-1]["content"], flags=re.M)
            out = {f"P{m}": "same" if f"{listed[i]}={listed[j]}" in equivalent else "different" for m, i, j in pairs}
            import json

            return json.dumps(out)
        raise AssertionError(request.stage)

    return ScriptedVerifier(reply)
