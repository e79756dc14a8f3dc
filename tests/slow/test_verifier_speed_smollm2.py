"""SmolLM2-135M-Instruct as the frozen verifier: the shared-prefix, slot-decision backend takes exactly the decisions
of the previous `model.generate` path (`shared_prefixes = False`, the code of the previous backend) on real verifier
requests, reads each shared context once, and its choice log-probabilities pick the verdicts it returns."""

import pytest
from testing_utils import ANSWERS as SAMPLE_ANSWERS
from testing_utils import CLAIMS, PARAPHRASE, equivalence_probes, probe_contexts, slot_logprobs, validation_probes

from rlce_trl.evidence.prompts import VERDICTS

pytestmark = pytest.mark.slow

ANSWERS = [*SAMPLE_ANSWERS, PARAPHRASE]


@pytest.fixture(scope="module")
def verifier():
    from rlce_trl.models import smollm2_instruct
    from rlce_trl.verifiers import TransformersVerifier, load_frozen_model

    return TransformersVerifier(*load_frozen_model(smollm2_instruct(), dtype="float32"), batch_size=16)


@pytest.fixture(scope="module")
def contexts():
    return probe_contexts(3)


def previous(verifier, requests):
    verifier.shared_prefixes = False
    try:
        return verifier.generate(requests)
    finally:
        verifier.shared_prefixes = True


def test_verdicts_are_the_previous_backends(verifier, contexts):
    requests = validation_probes(contexts, CLAIMS)
    new = verifier.generate(requests)
    work = verifier.last_work
    old = previous(verifier, requests)
    assert [r.texts for r in new] == [r.texts for r in old]
    assert [r.num_tokens for r in new] == [r.num_tokens for r in old]
    tokenize = verifier.tokenizer
    prompt_tokens = sum(len(tokenize(verifier._prompt(r), add_special_tokens=False)["input_ids"]) for r in requests)
    assert work.prefill_tokens - work.pad_tokens < 0.6 * prompt_tokens  # each context read once, not 5 times
    for reply in new:
        scores = reply.choice_logprobs
        assert set(scores) == set(VERDICTS) and max(scores, key=scores.get) == reply.texts[0]


def test_equivalence_decisions_are_the_previous_backends(verifier, contexts):
    requests = equivalence_probes(contexts, ANSWERS)
    new = verifier.generate(requests)
    old = previous(verifier, requests)
    assert [r.texts for r in new] == [r.texts for r in old]
    for reply in new:
        slots = slot_logprobs(reply.choice_logprobs)
        assert len(slots) == 15 and all(set(s) == {"same", "different"} for s in slots.values())
