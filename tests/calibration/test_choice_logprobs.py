"""`Reply.choice_logprobs` from the transformers backend (a real tiny model): scored choices agree with guided
decoding and with an unpadded forward pass of each prompt alone."""

import math

import pytest
import torch

from rlce_trl.evidence.prompts import VERDICTS
from rlce_trl.verifiers import Request, Sampling, TransformersVerifier, load_frozen_model


@pytest.fixture(scope="module")
def verifier(tiny_model_dir):
    return TransformersVerifier(*load_frozen_model(tiny_model_dir), batch_size=3)


def ask(content, choices, **kw):
    return Request(messages=[{"role": "user", "content": content}], choices=choices, **kw)


def reference(verifier, content, choice):
    """log p(first token of choice | prompt) from one unpadded forward pass over the prompt: the value the backend
    reports (`Reply.choice_logprobs` holds each choice's first-token log-probability, not renormalised; for the
    one-token verdicts that is the choice's probability)."""
    tok = verifier.tokenizer
    prompt = tok(verifier._prompt(ask(content, None)), add_special_tokens=False)["input_ids"]
    option = tok(choice, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = verifier.model(torch.tensor([prompt])).logits[0, -1].float()
    return torch.log_softmax(logits, -1)[option[0]].item()


def tok_first(verifier, choice):
    return verifier.tokenizer(choice, add_special_tokens=False)["input_ids"][0]


CONTENTS = ["the user said food yes", "no", "the user likes the food said the user likes food", "user"]


@pytest.mark.parametrize("choices", [VERDICTS, ("yes no", "food", "the user likes")])
def test_choice_logprobs_match_an_unpadded_forward_pass(verifier, choices):
    replies = verifier.generate([ask(c, choices, stage="validation") for c in CONTENTS])  # mixed lengths: padding
    for content, reply in zip(CONTENTS, replies, strict=True):
        assert set(reply.choice_logprobs) == set(choices)
        for choice, value in reply.choice_logprobs.items():
            assert value == pytest.approx(reference(verifier, content, choice), abs=1e-4)
        firsts = {tok_first(verifier, c) for c in choices}
        if len(firsts) == len(choices):  # distinct first tokens: the decision is the arg-max choice
            assert reply.texts == [max(reply.choice_logprobs, key=reply.choice_logprobs.get)]
        assert reply.finish_reasons == ["stop"]
    assert sum(math.exp(v) for v in replies[0].choice_logprobs.values()) <= 1.0 + 1e-6


def test_single_token_choices_give_the_guided_decoding_verdict(verifier):
    requests = [ask(c, VERDICTS, sampling=Sampling(max_tokens=4)) for c in CONTENTS]
    scored = verifier.generate(requests)
    tok = verifier.tokenizer
    with torch.inference_mode():  # the constrained-decoding path, one prompt at a time
        decoded = [verifier._generate_chunk([tok(verifier._prompt(r), add_special_tokens=False)["input_ids"]], r)[0]
                   for r in requests]
    assert [r.texts[0] for r in scored] == [r.texts[0] for r in decoded]
    assert all(r.choice_logprobs is None for r in decoded)


def test_free_and_sampled_requests_have_no_choice_logprobs(verifier):
    replies = verifier.generate([ask("the user", None, sampling=Sampling(max_tokens=3)),
                                 ask("the user", VERDICTS, sampling=Sampling(temperature=1.0, max_tokens=3))])
    assert [r.choice_logprobs for r in replies] == [None, None]
