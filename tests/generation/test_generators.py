"""`TransformersGenerator.sample`: seeded candidates with raw-model token log-probabilities."""

import math

import pytest

from rlce_trl.generation.generators import TransformersGenerator
from rlce_trl.generation.sampling import Sampling


@pytest.fixture(scope="module")
def generator(tiny_model_dir):
    return TransformersGenerator.from_pretrained(tiny_model_dir, max_new_tokens=6, dtype="float32")


PROMPTS = [[{"role": "user", "content": "the user said the food yes likes"}],
           [{"role": "user", "content": "the food no"}]]
SPECS = [Sampling(temperature=0.0), Sampling(temperature=1.0, seed=1), Sampling(temperature=1.0, seed=1),
         Sampling(temperature=0.7, seed=5)]


def test_sampling_is_seeded_per_prompt_and_logprobs_are_raw(generator):
    import torch

    out = generator.sample(PROMPTS, SPECS)
    assert len(out) == 2 and all(len(row) == 4 for row in out)
    again = generator.sample(PROMPTS[1:], SPECS)  # another batch composition: same candidates for the same prompt
    assert [s.text for s in again[0]] == [s.text for s in out[1]]
    assert again[0][1].token_logprobs == pytest.approx(out[1][1].token_logprobs)
    assert out[0][0].text == generator(PROMPTS[:1])[0]  # spec 0 is greedy
    tok, model = generator.tokenizer, generator.model
    for sampled in out[0]:
        assert all(lp <= 0 for lp in sampled.token_logprobs)
        # recompute under the raw model with teacher forcing
        text = tok.apply_chat_template(PROMPTS[0], tokenize=False, add_generation_prompt=True)
        prefix = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        ids = tok(sampled.text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        assert ids.shape[1] == len(sampled.token_logprobs)
        with torch.no_grad():
            logits = model(torch.cat([prefix, ids], 1)).logits[0, prefix.shape[1] - 1 : -1].log_softmax(-1)
        expected = logits.gather(-1, ids[0, :, None]).squeeze(-1).tolist()
        assert sampled.token_logprobs == pytest.approx(expected, abs=1e-4)
    greedy = out[0][0]
    assert all(math.exp(lp) > 0 for lp in greedy.token_logprobs)
