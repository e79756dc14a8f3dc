"""`rlce-trl compare` on the video path: a closed-label HBA task (MOSEI) with generated clips and the tiny Qwen3.5
VLM built locally, 2 methods x 1 seed, one GRPO step each through the recipes' video settings, validation on video
rows during training (the best checkpoint), the test evaluation of that checkpoint and of the base model on video
rows, the table. Run in the venv with torchvision: `-m vlm tests/vlm`."""

from __future__ import annotations

import json

import pytest
from testing_utils import build_tiny_vlm, make_video

from rlce_trl.cli import main

pytestmark = [pytest.mark.vlm, pytest.mark.slow]
pytest.importorskip("torchvision")
pytest.importorskip("av")

PROBLEM = "<video>\n<audio>\nTranscript: clip {k}\nWhat is the sentiment of the speaker in this video?"


def test_compare_on_video_rows(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    model = build_tiny_vlm(tmp_path / "tiny-vlm")
    media = tmp_path / "media"
    media.mkdir()
    records = []
    for k, seconds in enumerate((3, 4)):
        make_video(media / f"c{k}.mp4", seconds=seconds)
        records.append({"problem": PROBLEM.format(k=k), "answer": "positive" if k else "negative",
                        "videos": [f"c{k}.mp4"]})
    split = tmp_path / "split.jsonl"
    split.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "compare"
    argv = ["compare", "--task", "mosei", "--methods", "rlce,usc", "--seeds", "1", "--train_file", str(split),
            "--validation_file", str(split), "--test_file", str(split), "--media_root", str(media),
            "--output_dir", str(out), "--validation_steps", "1", "--max_new_tokens", "4",
            "--eval_backend", "transformers",
            "--", "--model_name_or_path", str(model), "--use_cpu", "true", "--bf16", "false", "--dtype", "float32",
            "--max_steps", "1", "--generation_batch_size", "4", "--per_device_train_batch_size", "4",
            "--gradient_accumulation_steps", "1", "--num_generations", "2", "--max_completion_length", "4",
            "--rlce_construction_max_tokens", "4", "--rlce_validation_max_tokens", "2",
            "--rlce_equivalence_max_tokens", "4", "--rlce_tests_per_direction", "1", "--log_completions", "false",
            "--save_strategy", "no", "--validation_max_new_tokens", "4", "--verifier_mode", "transformers"]
    assert main(argv) == 0, capsys.readouterr().err
    table = json.loads((out / "comparison.json").read_text())
    assert table["complete"] and table["base"]["score"] is not None
    for row in table["rows"]:
        assert list(row["seeds"]) == ["1"] and row["device_hours_per_run"] > 0 and row["std"] is None
    for method in ("rlce", "usc"):
        cell = out / method / "seed1"
        assert (cell / "train" / "best" / "config.json").is_file()
        predictions = [json.loads(line) for line in (cell / "test" / "predictions.jsonl").read_text().splitlines()]
        assert len(predictions) == 2
    assert (out / "comparison.png").read_bytes()[:4] == b"\x89PNG"
