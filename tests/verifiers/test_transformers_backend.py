"""The transformers backend against a real (tiny, random) model."""

import pytest

from rlce_trl.evidence.prompts import VERDICTS
from rlce_trl.verifiers import Request, Sampling, TransformersVerifier, load_frozen_model


@pytest.fixture(scope="module")
def verifier(tiny_model_dir):
    return TransformersVerifier(*load_frozen_model(tiny_model_dir), batch_size=3)


def ask(content, **kw):
    return Request(messages=[{"role": "user", "content": content}], **kw)


def test_guided_choice_returns_exactly_a_choice(verifier):
    requests = [ask(f"the user said food {w}", sampling=Sampling(max_tokens=4), choices=VERDICTS, stage="validation")
                for w in ["yes", "no", "likes", "the", "user"]]
    replies = verifier.generate(requests)
    assert len(replies) == 5 and all(r.texts[0] in VERDICTS and r.finish_reasons == ["stop"] for r in replies)


def test_sampled_requests_return_n_texts_and_count_tokens(verifier):
    before = verifier.stats.snapshot()
    replies = verifier.generate([ask("the user", sampling=Sampling(temperature=1.0, top_p=0.95, top_k=20,
                                                                    max_tokens=6, n=3), stage="construction")] * 2)
    assert [len(r.texts) for r in replies] == [3, 3]
    assert all(f in ("stop", "length") for r in replies for f in r.finish_reasons)
    work = verifier.stats.since(before)
    assert work.calls == 1 and work.requests == 2 and work.generated_tokens == sum(r.num_tokens for r in replies) > 0


def test_greedy_is_deterministic_and_order_is_kept(verifier):
    requests = [ask(w, sampling=Sampling(max_tokens=5)) for w in ["the", "the user said food likes yes no", "food"]]
    first = [r.texts for r in verifier.generate(requests)]
    again = [r.texts for r in verifier.generate(list(reversed(requests)))]
    assert first == list(reversed(again))


def test_frozen(verifier):
    assert not verifier.model.training and not any(p.requires_grad for p in verifier.model.parameters())
