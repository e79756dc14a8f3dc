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


def byte_level_tokenizer():
    """A byte-level BPE tokenizer trained in place: it can spell any JSON, unlike the tiny word-level one."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    corpus = ['{"P1": "same", "P2": "different"}', "the same different answers", "unknown yes no"] * 20
    core.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, special_tokens=["<eos>"],
                                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<eos>")


@pytest.mark.parametrize("pick", [0, -1, 1])
def test_json_object_of_enums_automaton_spells_only_valid_replies(pick):
    import json

    from rlce_trl.evidence.prompts import equivalence_schema
    from rlce_trl.verifiers.transformers_backend import _TemplateAutomaton, template_of

    tokenizer = byte_level_tokenizer()
    automaton = _TemplateAutomaton(tokenizer, template_of(None, equivalence_schema(3)), tokenizer.eos_token_id)
    generated: list[int] = []
    while True:  # walk the automaton, always taking the `pick`-th allowed token, as a constrained decoder would
        allowed = sorted(automaton.allowed(generated))
        token = allowed[pick % len(allowed)]
        if token == tokenizer.eos_token_id:
            break
        generated.append(token)
        assert len(generated) < 100
    reply = json.loads(tokenizer.decode(generated))
    assert set(reply) == {"P1", "P2", "P3"} and set(reply.values()) <= {"same", "different"}


def test_json_constrained_generation_with_a_real_model(verifier):
    from rlce_trl.evidence.canonicalization import parse_equivalence
    from rlce_trl.evidence.prompts import equivalence_schema

    # the tiny word-level vocabulary cannot spell JSON (its pieces are unknown tokens): unreadable, nothing merged
    request = ask("the user", sampling=Sampling(max_tokens=20), json_schema=equivalence_schema(1))
    (reply,) = verifier.generate([request])
    assert parse_equivalence(reply.texts[0], 1) == ([None], False)


def test_template_of_other_schemas_is_none():
    from rlce_trl.verifiers.transformers_backend import template_of

    assert template_of(None, {"type": "array"}) is None
    assert template_of(("a", "b"), None) == [("a", "b")]
