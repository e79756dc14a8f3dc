"""The whole comparison grid, scaled down, through the real command: `rlce-trl compare` on the bundled preference
sample with a tiny random model, 2 methods x 2 seeds, one GRPO step each, validation after it (the best checkpoint),
the test evaluation of that checkpoint and of the base model, the table; then the same command again runs nothing.
The LLM judge is a FAKE OpenAI-compatible server (tests/fakes.py) with stand-in PrefEval check prompts."""

import json
import zlib

import pytest

from rlce_trl.cli import main

# shrinks a recipe to a tiny CPU run (as tests/entrypoints/helpers.py's TINY)
TINY = ["--max_completion_length", "8", "--rlce_construction_max_tokens", "16", "--rlce_validation_max_tokens", "4",
        "--rlce_equivalence_max_tokens", "8", "--learning_rate", "0.1", "--per_device_train_batch_size", "4"]
STAND_IN_PROMPTS = {  # our own stand-ins with PrefEval's placeholder names (the real prompts stay in the checkout)
    "check_acknowledge.txt": "CHECK=acknowledge\nQ: {question}\nR: {end_generation}\n<preference>..</preference>",
    "check_hallucination.txt": "CHECK=hallucination\nP: {preference}\nS: {assistant_restatement}",
    "check_violation.txt": "CHECK=violation\nP: {preference}\nQ: {question}\nR: {end_generation}",
    "check_helpful.txt": "CHECK=helpful\nQ: {question}\nR: {end_generation}",
}


def judge(prompt, index):
    """Deterministic per prompt: a response passes every check or fails one, by a hash of what it said."""
    good = zlib.crc32(prompt.encode()) % 3 != 0
    if "CHECK=acknowledge" in prompt:
        return "<preference>you said</preference><answer>Yes</answer>"
    if "CHECK=helpful" in prompt:
        return "<explanation>x</explanation><answer>Yes</answer>"
    if "CHECK=violation" in prompt:
        return "<answer>No</answer>" if good else "<answer>Yes</answer>"
    return "<answer>No</answer>"


@pytest.mark.slow
def test_compare_grid_on_the_sample(tiny_model_dir, tmp_path, fake_judge, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    prompts = tmp_path / "PrefEvalPrompts"
    (prompts / "error_type").mkdir(parents=True)
    for name, text in STAND_IN_PROMPTS.items():
        (prompts / "error_type" / name).write_text(text)
    server = fake_judge(judge)
    out = tmp_path / "compare"
    argv = ["compare", "--task", "prefeval", "--methods", "rlce,usc", "--seeds", "1,2", "--data", "sample",
            "--prefeval_dir", str(prompts), "--judge_base_url", server.base_url, "--judge_model", "j",
            "--output_dir", str(out), "--launcher", "python", "--validation_steps", "1", "--validation_limit", "2",
            "--test_limit", "3", "--max_new_tokens", "4", "--eval_backend", "transformers",
            "--", "--model_name_or_path", tiny_model_dir, "--bf16", "false", "--use_cpu", "true", "--use_vllm",
            "false", "--verifier_mode", "transformers", "--dtype", "float32", "--activation_checkpointing", "false",
            "--max_steps", "1", "--generation_batch_size", "4", "--gradient_accumulation_steps", "1",
            "--save_strategy", "no", "--validation_max_new_tokens", "4", "--log_completions", "false",
            "--generation_kwargs", "{}", *TINY]
    assert main(argv) == 0, capsys.readouterr().err
    table = json.loads((out / "comparison.json").read_text())
    assert table["complete"] and table["model"] == tiny_model_dir and not table["paper_model"]
    base = table["base"]["score"]
    assert base is not None and 0 <= base <= 100
    for row in table["rows"]:
        assert set(row["seeds"]) == {"1", "2"} and row["missing_seeds"] == []
        assert row["mean"] == pytest.approx(sum(row["seeds"].values()) / 2, abs=0.01)
        assert row["delta"] == pytest.approx(row["mean"] - base, abs=0.02) and row["device_hours_per_run"] > 0
        assert row["paper_mean"] is None
    for method in ("rlce", "usc"):
        for seed in (1, 2):
            cell = out / method / f"seed{seed}"
            done = json.loads((cell / "done.json").read_text())
            assert done["checkpoint"].endswith("train/best") and done["best_step"] == 1
            assert (cell / "train" / "best" / "config.json").is_file()
            summary = json.loads((cell / "test" / "summary.json").read_text())
            assert summary["num_rows"] == 3 and summary["complete"]
            assert f"--seed {seed}" in (cell / "train.log").read_text()
    assert (out / "comparison.png").read_bytes()[:4] == b"\x89PNG"
    assert "Universal Self-Consistency" in (out / "comparison.md").read_text()
    # resumable: the same command runs no cell again
    logs = {p: p.read_text() for p in out.rglob("*.log")}
    assert main(argv) == 0
    assert {p: p.read_text() for p in out.rglob("*.log")} == logs
