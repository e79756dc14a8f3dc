"""The transformers verifier on hybrid models: caches that hold recurrent or convolution state beside keys and values.

Qwen3.5 (Gated DeltaNet + full attention), NemotronH (Mamba-2 + attention) and LFM2 (short convolutions + attention)
share prompt prefixes like the attention-only families, each continuation on its own copy of the prefix state; their
replies must be exactly those of plain `model.generate`, one request per call. The models are sharpened (weights
scaled) so that decisions vary between requests and the comparison can fail. Before this path existed, the first
request raised `IndexError` inside transformers (a bare key/value cache had no recurrent state).
"""

from __future__ import annotations

import pytest
import torch
from testing_utils import build_bpe_tokenizer, same_replies, validation_probes
from tiny_families import HYBRIDS, build_family

from rlce_trl.evidence.prompts import VERDICTS, equivalence_messages, equivalence_schema, validation_messages
from rlce_trl.generation.caches import decoding_path
from rlce_trl.verifiers import Request, Sampling, TransformersVerifier, VerifierUnavailableError, load_frozen_model
from rlce_trl.verifiers.from_config import frozen_verifier

CONTEXTS = [" ".join([c] * 4) for c in (
    "The user said they are vegetarian.", "Write one evidence test about the input.", "same different yes")]
CLAIMS = ["The user is vegetarian.", "asked a question", "yes no unknown", "same"]


# Qwen3.5 (the paper's family) in the fast suite; the other hybrids, whose reference `generate` runs take minutes on
# CPU, are slow.
@pytest.fixture(scope="module", params=[f if f == "qwen3_5" else pytest.param(f, marks=pytest.mark.slow)
                                        for f in HYBRIDS])
def verifier(request, tmp_path_factory):
    """The default frozen verifier (`verifier_mode: transformers`), as the trainer, the co-evolution partner and the
    data builds load it."""
    path = build_family(request.param, tmp_path_factory.mktemp(request.param), build_bpe_tokenizer(), sharpen=6.0)
    return frozen_verifier(path, dtype=torch.float32, batch_size=4)


def plain_generate(verifier, requests):
    """Each request alone through `model.generate` (the verifier's generate path, one prompt per call)."""
    verifier.shared_prefixes, verifier.batch_size = False, 1
    try:
        return verifier.generate(requests)
    finally:
        verifier.shared_prefixes, verifier.batch_size = True, 4


def test_hybrids_take_the_recurrent_path(verifier):
    assert verifier.decoding_path == "recurrent"


def test_verdicts_equal_plain_generate_and_each_context_is_read_once(verifier):
    requests = validation_probes(CONTEXTS, CLAIMS)
    new = verifier.generate(requests)
    work = verifier.last_work
    same_replies(new, plain_generate(verifier, requests))
    # the log-probabilities at the decision slot are those of one forward over the whole prompt, no cache: a state
    # shared between continuations, or a pad in a row, would move them (and they differ between requests)
    tok, model = verifier.tokenizer, verifier.model
    ids = [tok(verifier._prompt(r), add_special_tokens=False)["input_ids"] for r in requests]
    for reply, prompt in zip(new, ids, strict=True):
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([prompt]), use_cache=False).logits[0, -1].float(), dim=-1)
        expected = {c: float(logp[tok(c, add_special_tokens=False)["input_ids"][0]]) for c in VERDICTS}
        assert reply.choice_logprobs == pytest.approx(expected, abs=1e-4)
    assert len({round(r.choice_logprobs["yes"], 4) for r in new}) > len(CONTEXTS)
    assert work.pad_tokens == 0  # a pad would move the recurrent state
    assert work.prefill_tokens < sum(map(len, ids))  # the shared contexts were read once


def test_equivalence_json_equals_plain_generate(verifier):
    answers = [["A", "B b", "C same"], ["vegetarian", "the user", "yes"]]
    requests = [
        Request(messages=equivalence_messages(c, a, [(0, 1), (1, 2)]),
                sampling=Sampling(max_tokens=64), json_schema=equivalence_schema(2), stage="equivalence")
        for c in CONTEXTS[:2] for a in answers
    ]
    new = verifier.generate(requests)
    same_replies(new, plain_generate(verifier, requests))
    assert all(r.finish_reasons == ["stop"] for r in new)


def test_free_text_through_refilled_batches_equals_plain_generate(verifier):
    """Free text streams rows together (single-token steps; prompts fed one at a time, then joined): each reply is
    still that of its prompt alone."""
    requests = [Request(messages=[{"role": "user", "content": f"{c}\nWrite one evidence test about {t}"}],
                        sampling=Sampling(max_tokens=16, one_line=t == "same")) for c in CONTEXTS[:2] for t in CLAIMS]
    new = verifier.generate(requests)
    same_replies([r for r, q in zip(new, requests, strict=True) if not q.sampling.one_line],
                 plain_generate(verifier, [q for q in requests if not q.sampling.one_line]))
    assert len({r.texts[0] for r in new}) > 2  # the replies differ: the comparison can fail
    # greedy with n > 1: n copies of the one greedy reply; sampled rows each continue their own copy of the state
    (twice,) = verifier.generate([Request(messages=requests[0].messages, sampling=Sampling(max_tokens=16, n=2))])
    assert twice.texts == new[0].texts * 2
    torch.manual_seed(0)
    (sampled,) = verifier.generate([Request(messages=requests[0].messages,
                                            sampling=Sampling(temperature=1.0, max_tokens=8, n=3))])
    assert len(sampled.texts) == 3


def test_a_session_continues_a_cached_prefix_state_with_the_same_replies(verifier):
    free = [Request(messages=validation_messages(c, "x"), sampling=Sampling(max_tokens=6)) for c in CONTEXTS]
    calls = [validation_probes(CONTEXTS, CLAIMS)[:4], free, validation_probes(CONTEXTS, CLAIMS)[:4]]
    plain = [verifier.generate(requests) for requests in calls]
    with verifier.session():
        reused = [(verifier.generate(requests), verifier.last_work) for requests in calls]
    for (replies, _), expected in zip(reused, plain, strict=True):
        same_replies(replies, expected)
    assert reused[0][1].reused_tokens == 0
    # the context read in the first call is continued, not read again (a copy: the third call reads it too)
    assert reused[1][1].reused_tokens > 0 and reused[2][1].reused_tokens > 0


def test_a_cache_the_backend_does_not_know_gets_one_line_naming_the_way_out(tmp_path, monkeypatch):
    """A model whose layers look for cache state the backend did not build fails with the model type and
    `verifier_mode: server`, not with an IndexError from inside transformers."""
    path = build_family("qwen3_5", tmp_path / "q", build_bpe_tokenizer())
    model, tokenizer = load_frozen_model(path, dtype=torch.float32)
    verifier = TransformersVerifier(model, tokenizer)
    verifier.decoding_path = "keys-values"  # what every model got before: a bare key/value cache
    with pytest.raises(VerifierUnavailableError, match=r"qwen3_5_text model's cache .*verifier_mode: server") as error:
        verifier.generate(validation_probes(CONTEXTS, CLAIMS)[:1])
    assert "\n" not in str(error.value)


def test_decoding_paths_of_the_families(tmp_path):
    from tiny_families import FAMILIES

    tokenizer = build_bpe_tokenizer()
    import transformers

    for family, (config_class, model_class, extra) in FAMILIES.items():
        config = getattr(transformers, config_class)(vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2,
                                                     num_attention_heads=2, num_key_value_heads=1, **extra)
        with torch.device("meta"):
            model = getattr(transformers, model_class)(config)
        expected = "recurrent" if family in HYBRIDS else "keys-values"
        assert decoding_path(model) == expected, family


def test_the_generators_on_a_hybrid_give_plain_generate_replies(verifier):
    """`rlce-trl evaluate` / `sample` generators drive `model.generate` (which builds the model's own cache): batched
    with left padding, each reply is that of its prompt alone, and sampling returns token log-probabilities."""
    from rlce_trl.generation.generators import TransformersGenerator

    generator = TransformersGenerator(verifier.model, verifier.tokenizer, max_new_tokens=8, batch_size=4)
    prompts = [[{"role": "user", "content": c}] for c in [*CONTEXTS, "yes"]]
    batched = generator(prompts)
    generator.batch_size = 1
    assert batched == generator(prompts) and len(set(batched)) > 1
    (row,) = generator.sample(prompts[:1], [Sampling(), Sampling(temperature=1.0, seed=3)])
    assert row[0].text == batched[0] and len(row[1].token_logprobs) > 0
