"""One-token decisions over an OpenAI-compatible server (`verifiers/decisions.py`), against a scripted `send` that
records every batch it is given (the real server is in test_vllm_decisions.py)."""

from __future__ import annotations

import json

from rlce_trl.evidence.prompts import equivalence_schema
from rlce_trl.verifiers.base import Reply, Request, Sampling
from rlce_trl.verifiers.decisions import decide
from rlce_trl.verifiers.server import ServerVerifier

VERDICTS = ("yes", "no", "unknown")


class ScriptedServer:
    """Answers each request with `answer(request)` -> (text, top logprobs by token), and keeps the batches."""

    def __init__(self, answer):
        self.answer = answer
        self.batches: list[list[Request]] = []

    def __call__(self, requests: list[Request]) -> list[Reply]:
        self.batches.append(requests)
        out = []
        for request in requests:
            text, logprobs = self.answer(request)
            if text is None:
                out.append(Reply.failed(request.sampling.n, "HTTP 500"))
            else:
                tokens = 1 if request.sampling.max_tokens == 1 else 7
                out.append(Reply([text] * request.sampling.n, ["length"] * request.sampling.n, tokens,
                                 choice_logprobs=logprobs))
        return out


def verdict(content: str, **kw) -> Request:
    return Request(messages=[{"role": "user", "content": content}], choices=VERDICTS, stage="validation", **kw)


def test_verdicts_take_one_token_and_keep_the_choices_logprobs():
    server = ScriptedServer(lambda r: ("unk", {"unk": -0.2, "yes": -1.5, "no": -3.0, "Yes": -0.9}))
    (reply,) = decide([verdict("x", sampling=Sampling(max_tokens=16))], server)
    assert reply.texts == ["unknown"] and reply.finish_reasons == ["stop"] and reply.num_tokens == 1
    assert reply.choice_logprobs == {"unknown": -0.2, "yes": -1.5, "no": -3.0}  # "Yes" is not a choice's start
    (sent,) = server.batches[0]
    assert sent.sampling.max_tokens == 1 and sent.choices == VERDICTS
    assert sent.payload_extra == {"logprobs": True, "top_logprobs": 20}


def test_an_unreadable_first_token_sends_the_original_request():
    answers = iter([("n", {}), ("no", {})])  # "n" starts both choices: ask again, whole
    request = Request(messages=[{"role": "user", "content": "x"}], choices=("no", "none"), stage="validation")
    server = ScriptedServer(lambda r: next(answers))
    (reply,) = decide([request], server)
    assert reply.texts == ["no"] and len(server.batches) == 2 and server.batches[1] == [request]


def test_a_failed_decision_is_not_sent_twice():
    server = ScriptedServer(lambda r: (None, None))
    (reply,) = decide([verdict("x")], server)
    assert reply.error == "HTTP 500" and len(server.batches) == 1


def test_equivalence_is_decided_field_by_field_in_rounds_with_other_requests_in_the_first():
    decisions = {"A": ["same", "different", "different"], "B": ["different", "different", "same"]}

    def answer(request):
        if request.choices is None:
            return "free text", None
        group, prefix = request.messages[0]["content"], request.messages[-1]["content"]
        slot = prefix.count(":") - 1
        pick = decisions[group][slot]
        return pick[:3], {pick[:3]: -0.1, ("diff" if pick == "same" else "sam"): -2.4}

    equivalence = [Request(messages=[{"role": "user", "content": g}], sampling=Sampling(max_tokens=256),
                           json_schema=equivalence_schema(3), stage="equivalence") for g in ("A", "B")]
    free = Request(messages=[{"role": "user", "content": "A"}], sampling=Sampling(max_tokens=8))
    server = ScriptedServer(answer)
    replies = decide([equivalence[0], free, equivalence[1]], server)
    assert [len(b) for b in server.batches] == [3, 2, 2]  # 3 fields: 3 rounds, both groups in each
    prefix = '{"P1":"same","P2":"different","P3":"'
    assert server.batches[2][0].messages[-1] == {"role": "assistant", "content": prefix}
    assert server.batches[2][0].payload_extra["continue_final_message"] is True
    assert replies[1].texts == ["free text"] and replies[1].choice_logprobs is None
    for group, reply in zip("AB", (replies[0], replies[2]), strict=True):
        assert json.loads(reply.texts[0]) == {f"P{m + 1}": d for m, d in enumerate(decisions[group])}
        assert reply.num_tokens == 3 and reply.choice_logprobs[f"P1={decisions[group][0]}"] == -0.1
        other = "different" if decisions[group][0] == "same" else "same"
        assert reply.choice_logprobs[f"P1={other}"] == -2.4


def test_server_reply_parsing_keeps_the_first_tokens_top_logprobs():
    data = {"choices": [{"index": 0, "message": {"content": "yes"}, "finish_reason": "length",
                         "logprobs": {"content": [{"token": "yes", "logprob": -0.05, "top_logprobs": [
                             {"token": "yes", "logprob": -0.05}, {"token": "no", "logprob": -3.1}]}]}}],
            "usage": {"completion_tokens": 1}}
    reply = ServerVerifier._parse(data, 1)
    assert reply.choice_logprobs == {"yes": -0.05, "no": -3.1} and reply.num_tokens == 1
    assert ServerVerifier._parse({"choices": [{"message": {"content": "x"}}]}, 1).choice_logprobs is None


def test_every_decision_request_carries_the_original_requests_clip():
    """A verdict and each round of an equivalence reply show the verifier the clip the full request carries (a video
    recipe's validation and equivalence are judged with the frames; without them the server judged text alone)."""
    clip = [{"type": "video", "source": "clip.mp4", "metadata": None}]
    server = ScriptedServer(lambda r: ("same"[:3], {"sam": -0.1}) if r.stage == "equivalence" else ("yes", {}))
    equivalence = Request(messages=[{"role": "user", "content": "A"}], json_schema=equivalence_schema(2),
                          stage="equivalence", media=clip)
    replies = decide([verdict("x", media=clip), equivalence, verdict("text only")], server)
    assert replies[0].texts == ["yes"] and json.loads(replies[1].texts[0]) == {"P1": "same", "P2": "same"}
    sent = [r for batch in server.batches for r in batch]
    assert len(sent) == 4 and [r.media for r in sent] == [clip, None, clip, clip]  # verdicts, then 2 rounds
