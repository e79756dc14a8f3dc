"""SmolLM2-135M-Instruct as the frozen verifier: the shared-prefix, slot-decision backend takes exactly the decisions
of the previous `model.generate` path (`shared_prefixes = False`, the code of the previous backend) on real verifier
requests, reads each shared context once, and its choice log-probabilities pick the verdicts it returns."""

import pytest

from rlce_trl.evidence.canonicalization import equivalence_request
from rlce_trl.evidence.prompts import VERDICTS, render_context
from rlce_trl.evidence.state import Group, GroupState
from rlce_trl.evidence.validation import validation_request
from rlce_trl.verifiers.base import slot_logprobs

pytestmark = pytest.mark.slow

CLAIMS = [
    "The user said they are vegetarian.",
    "The user asked for a recommendation.",
    "The user mentioned a budget limit.",
    "The user lives in Paris.",
    "The user has a dog.",
]
ANSWERS = [
    "Suggest options that respect what the user said about themselves earlier.",
    "Give the most popular recommendation without any special constraints.",
    "Recommend the cheapest option and nothing else.",
    "Ask the user a clarifying question before recommending anything.",
    "Suggest something new that the user has never tried before.",
    "Suggest options that respect what the user told me before.",
]


@pytest.fixture(scope="module")
def verifier():
    from rlce_trl.models import smollm2_instruct
    from rlce_trl.verifiers import TransformersVerifier, load_frozen_model

    return TransformersVerifier(*load_frozen_model(smollm2_instruct(), dtype="float32"), batch_size=16)


@pytest.fixture(scope="module")
def contexts():
    from rlce_trl.data.sample import load_preference_sample

    return [render_context(row["prompt"]) for row in load_preference_sample("train")[:3]]


def previous(verifier, requests):
    verifier.shared_prefixes = False
    try:
        return verifier.generate(requests)
    finally:
        verifier.shared_prefixes = True


def test_verdicts_are_the_previous_backends(verifier, contexts):
    requests = [validation_request(c, claim, 16) for c in contexts for claim in CLAIMS]
    new = verifier.generate(requests)
    work = verifier.last_work
    old = previous(verifier, requests)
    assert [r.texts for r in new] == [r.texts for r in old]
    assert [r.num_tokens for r in new] == [r.num_tokens for r in old]
    prompt_tokens = sum(len(verifier.tokenizer(verifier._prompt(r), add_special_tokens=False)["input_ids"]) for r in requests)
    assert work.prefill_tokens - work.pad_tokens < 0.6 * prompt_tokens  # each context read once, not 5 times
    for reply in new:
        scores = reply.choice_logprobs
        assert set(scores) == set(VERDICTS) and max(scores, key=scores.get) == reply.texts[0]


def test_equivalence_decisions_are_the_previous_backends(verifier, contexts):
    states = []
    for c in contexts:
        state = GroupState(group=Group(context=c, completions=[], labels=None))
        state.answers = list(ANSWERS)
        states.append(state)
    requests = [equivalence_request(s, 256) for s in states]
    new = verifier.generate(requests)
    old = previous(verifier, requests)
    assert [r.texts for r in new] == [r.texts for r in old]
    for reply in new:
        slots = slot_logprobs(reply.choice_logprobs)
        assert len(slots) == 15 and all(set(s) == {"same", "different"} for s in slots.values())
