"""The reward-function form of RLCE (`RLCEReward`, `rlce_format`) with TRL's contract, for a plain GRPOTrainer."""

import pytest
from fakes import evidence_verifier

from rlce_trl import RLCEReward, rlce_format
from rlce_trl.evidence.pipeline import EvidenceSettings


def test_rlce_reward_scores_local_groups_and_logs():
    verifier = evidence_verifier({"positive>negative": "yes", "negative>positive": "no"})
    reward = RLCEReward(verifier, num_generations=2, settings=EvidenceSettings(redact_answers=False))
    prompts = [[{"role": "user", "content": "how does the user feel?"}]] * 4
    completions = [[{"role": "assistant", "content": f"\\boxed{{{a}}}"}] for a in
                   ("positive", "negative", "positive", "positive")]
    metrics, columns = {}, {}
    rewards = reward(prompts, completions, answer_options=[["positive", "negative"]] * 4,
                     log_metric=metrics.__setitem__, log_extra=columns.__setitem__)
    assert rewards == [1.0, 0.0, None, None]  # group 2 has one distinct answer: no verification reward
    assert metrics["rlce/verified_fraction"] == 0.5 and columns["rlce_verified_answer"][0] == "positive"
    assert reward.__name__ == "rlce_verified"
    assert rlce_format(completions=completions) == [1.0] * 4
    with pytest.raises(ValueError, match="RLCEGRPOTrainer"):
        reward(prompts[:3], completions[:3])
