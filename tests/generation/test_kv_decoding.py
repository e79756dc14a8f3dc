"""Shared-prefix reading and slot decisions of the transformers backend give exactly `generate`'s replies.

The model is the tiny byte-level chat model with its weights scaled up, so that its logits are sharp enough for the
decisions to vary (a random tiny model otherwise answers the same everywhere and a comparison could not fail), and
its tokenizer spells `unknown`, `same` and `different` in several tokens, so the walk through multi-token choices is
exercised too. `shared_prefixes=False` is the previous behaviour: every request through `model.generate`.
"""

from __future__ import annotations

import pytest
import torch
from testing_utils import same_replies, slot_logprobs, validation_probes

from rlce_trl.evidence.prompts import VERDICTS, equivalence_messages, equivalence_schema, validation_messages
from rlce_trl.generation.kv_decoding import plan_prefixes
from rlce_trl.verifiers import Request, Sampling, TransformersVerifier, load_frozen_model

CONTEXTS = [" ".join([c] * 6) for c in (
    "The user said they are vegetarian.", "Write one evidence test about the input.", "same different yes")]
CLAIMS = ["The user is vegetarian.", "asked a question", "yes no unknown", "same", "Answer A", "recipe"]
ANSWERS = [["A", "B b", "C same", "different"], ["vegetarian", "the user", "yes", "recipe"], ["no", "no", "x", "y"]]


@pytest.fixture(scope="module")
def verifier(tiny_chat_model):
    model, tokenizer = load_frozen_model(str(tiny_chat_model))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" not in name:
                parameter.mul_(6)
    return TransformersVerifier(model, tokenizer, batch_size=4)


def both(verifier, requests):
    new = verifier.generate(requests)
    work = verifier.last_work
    verifier.shared_prefixes = False
    try:
        old = verifier.generate(requests)
    finally:
        verifier.shared_prefixes = True
    return new, old, work


def test_verdicts_equal_generate_and_the_shared_context_is_read_once(verifier):
    requests = validation_probes(CONTEXTS, CLAIMS)
    new, old, work = both(verifier, requests)
    same_replies(new, old)
    assert len({r.texts[0] for r in new}) >= 2  # the decisions vary: the comparison can fail
    ids = [verifier.tokenizer(verifier._prompt(r), add_special_tokens=False)["input_ids"] for r in requests]
    clusters = plan_prefixes(ids, list(range(len(ids))))
    assert len(clusters) == len(CONTEXTS)  # one shared prefix per sample context
    read = sum(length for length, _ in clusters) + sum(len(ids[k]) - length for length, ms in clusters for k in ms)
    decisions = work.by_kind.get("decision", 0)  # the rest of multi-token verdicts, fed after the first token
    assert work.prefill_tokens - work.pad_tokens == read + decisions < sum(map(len, ids))


def test_a_verdict_cut_by_max_tokens_equals_generate(verifier):
    new, old, _ = both(verifier, validation_probes(CONTEXTS, CLAIMS, max_tokens=2))  # `unknown` takes 3 tokens here
    same_replies(new, old)
    assert "length" in {r.finish_reasons[0] for r in new}


def test_equivalence_json_equals_generate(verifier):
    requests = [
        Request(messages=equivalence_messages(c, answers, [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]),
                sampling=Sampling(max_tokens=256), json_schema=equivalence_schema(6), stage="equivalence")
        for c in CONTEXTS for answers in ANSWERS
    ]
    new, old, work = both(verifier, requests)
    same_replies(new, old)
    assert all(r.finish_reasons == ["stop"] for r in new)
    assert work.decode_steps == 0  # no token-by-token decoding: forced text is fed with each decision
    slots = slot_logprobs(new[0].choice_logprobs)
    assert set(slots) == {f"P{m}" for m in range(1, 7)}
    assert all(set(s) == {"same", "different"} for s in slots.values())


def test_choice_logprobs_are_the_logits_at_the_decision_slot(verifier):
    requests = validation_probes(CONTEXTS, CLAIMS)[:4]
    replies = verifier.generate(requests)
    tok, model = verifier.tokenizer, verifier.model
    for request, reply in zip(requests, replies, strict=True):
        ids = tok(verifier._prompt(request), add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([ids])).logits[0, -1].float(), dim=-1)
        expected = {c: float(logp[tok(c, add_special_tokens=False)["input_ids"][0]]) for c in VERDICTS}
        assert reply.choice_logprobs == pytest.approx(expected, abs=1e-4)
        first = {c: tok(c, add_special_tokens=False)["input_ids"][0] for c in VERDICTS}
        allowed = sorted(set(first.values()))
        decided = allowed[int(torch.argmax(logp[allowed]))]
        assert first[reply.texts[0]] == decided


def test_greedy_free_text_equals_generate(verifier):
    requests = [Request(messages=validation_messages(c, t), sampling=Sampling(max_tokens=12))
                for c in CONTEXTS for t in CLAIMS[:3]]
    new, old, _ = both(verifier, requests)
    same_replies(new, old)
    assert all(r.choice_logprobs is None for r in new)
    # greedy with n > 1 (which `generate` refuses): n copies of the one greedy reply
    (twice,) = verifier.generate([Request(messages=requests[0].messages, sampling=Sampling(max_tokens=12, n=2))])
    assert twice.texts == new[0].texts * 2 and twice.num_tokens == 2 * new[0].num_tokens


def test_sampling_with_top_k_1_is_greedy_and_counts_tokens(verifier):
    greedy = [Request(messages=validation_messages(c, "x"), sampling=Sampling(max_tokens=10)) for c in CONTEXTS]
    sampled = [Request(messages=r.messages, sampling=Sampling(temperature=0.7, top_k=1, max_tokens=10, n=3),
                       stage="construction") for r in greedy]
    before = verifier.stats.snapshot()
    replies = verifier.generate(sampled)
    work = verifier.stats.since(before)
    assert work.generated_tokens == sum(r.num_tokens for r in replies) > 0
    assert [r.texts for r in replies] == [r.texts * 3 for r in verifier.generate(greedy)]


def test_sampled_rows_differ_and_decode_without_padding(verifier):
    request = Request(messages=validation_messages(CONTEXTS[0], "x"),
                      sampling=Sampling(temperature=1.0, max_tokens=8, n=4), stage="construction")
    torch.manual_seed(0)
    (reply,) = verifier.generate([request])
    assert len(reply.texts) == 4 and len(set(reply.texts)) > 1
    assert verifier.last_work.pad_tokens == 0


def test_plan_prefixes_groups_by_shared_prefix():
    ids = [[1, 2, 3, 4, 9], [7, 8], [1, 2, 3, 4, 5, 6], [1, 2, 3, 5], [7, 8, 9, 9]]
    assert plan_prefixes(ids, [0, 1, 2, 3, 4]) == [(3, [2, 0, 3]), (1, [1, 4])]
    assert plan_prefixes(ids, [1]) == [(1, [1])]


def test_one_line_replies_stop_after_their_first_line_and_read_the_same(verifier):
    """Greedy free text with and without `one_line`: the one-line reply is the full reply cut after the line break
    that ends its first non-blank line (finish "stop"), so `parse_test` reads the same test from both."""
    from rlce_trl.evidence.construction import parse_test
    from rlce_trl.verifiers.base import first_line_ended

    messages = [[{"role": "user", "content": f"{c}\nWrite one evidence test."}] for c in CONTEXTS]
    full = verifier.generate([Request(messages=m, sampling=Sampling(max_tokens=48)) for m in messages])
    short = verifier.generate([Request(messages=m, sampling=Sampling(max_tokens=48, one_line=True)) for m in messages])
    cut = 0
    for a, b in zip(full, short, strict=True):
        if first_line_ended(a.texts[0]):
            cut += 1
            assert a.texts[0].startswith(b.texts[0]) and len(b.texts[0]) < len(a.texts[0])
            assert first_line_ended(b.texts[0]) and b.finish_reasons == ["stop"] and b.num_tokens < a.num_tokens
            assert parse_test(b.texts[0], "stop") == parse_test(a.texts[0], a.finish_reasons[0])
        else:
            assert (b.texts, b.finish_reasons) == (a.texts, a.finish_reasons)
    assert cut  # some replies do end a line early: the comparison can fail


@pytest.mark.parametrize("text, ended", [("claim", False), ("claim\n", True), ("\n\n  \nclaim", False),
                                         ("```\nclaim\r\nmore", True), ("  \n", False), ("a\u2028", True)])
def test_first_line_ended(text, ended):
    from rlce_trl.verifiers.base import first_line_ended

    assert first_line_ended(text) is ended


def test_refilled_batches_give_the_replies_of_one_batch(verifier, monkeypatch):
    """9 one-line prompts ending at different steps, through batches of 4: rows join the running batch as others
    end (caches of different lengths merged, leading pad columns dropped) and every reply is the one it gets in a
    single batch of 16."""
    from rlce_trl.generation.kv_decoding import Rows

    joins = []
    extend = Rows.extend
    monkeypatch.setattr(Rows, "extend", lambda self, other: (joins.append(len(other)), extend(self, other))[1])
    requests = [Request(messages=[{"role": "user", "content": f"{c}\nWrite one evidence test about {t}"}],
                        sampling=Sampling(max_tokens=24, one_line=True)) for c in CONTEXTS for t in CLAIMS[:3]]
    refilled = verifier.generate(requests)
    assert joins  # rows joined a running batch
    verifier.batch_size = 16
    try:
        single = verifier.generate(requests)
    finally:
        verifier.batch_size = 4
    same_replies(refilled, single)
    assert len({r.num_tokens for r in single}) > 1  # replies end at different steps


def test_a_session_reads_each_context_once_across_calls_with_the_same_replies(verifier):
    """Validation, then construction-like free text, then validation again over the same contexts: inside a session
    the later calls continue the cached context instead of reading it again, and reply exactly as without it."""
    free = [Request(messages=validation_messages(c, "x"), sampling=Sampling(max_tokens=6)) for c in CONTEXTS]
    calls = [validation_probes(CONTEXTS, CLAIMS)[:6], free, validation_probes(CONTEXTS, CLAIMS)[6:]]
    plain = []
    for requests in calls:
        plain.append(verifier.generate(requests))
    reused = []
    with verifier.session():
        for requests in calls:
            reused.append((verifier.generate(requests), verifier.last_work))
    assert reused[0][1].reused_tokens == 0  # nothing cached yet
    for (replies, _), expected in zip(reused, plain, strict=True):
        same_replies(replies, expected)
    context_tokens = len(verifier.tokenizer(verifier._prompt(free[0]), add_special_tokens=False)["input_ids"]) // 2
    assert reused[1][1].reused_tokens > context_tokens and reused[2][1].reused_tokens > context_tokens
    assert verifier._prefixes is None  # dropped at the end of the session
