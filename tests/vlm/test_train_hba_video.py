"""End to end on CPU: `examples/train_hba.py --config configs/<task>_rlce.yaml` trains the tiny Qwen3.5 VLM on video
rows by default (generated clips, 2 steps, the recipe's video settings), writes a checkpoint, and `rlce-trl evaluate`
scores that checkpoint on video rows. Run in the venv with torchvision: `-m vlm tests/vlm`."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from testing_utils import build_tiny_vlm, make_video

from rlce_trl.cli import main as cli

pytestmark = pytest.mark.vlm
pytest.importorskip("torchvision")
pytest.importorskip("av")

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = "<video>\n<audio>\nTranscript: clip {k}\nWhat is the sentiment of the speaker in this video?"


def load_script():
    spec = importlib.util.spec_from_file_location("train_hba", ROOT / "examples" / "train_hba.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("task", ["mosei", pytest.param("intentqa", marks=pytest.mark.slow),
                                  pytest.param("urfunny", marks=pytest.mark.slow)])
def test_recipe_trains_on_video_and_evaluate_scores_the_checkpoint(task, tmp_path, monkeypatch):
    model = build_tiny_vlm(tmp_path / "tiny-vlm")
    media = tmp_path / "media"
    media.mkdir()
    records = []
    for k, seconds in enumerate((3, 5)):
        make_video(media / f"c{k}.mp4", seconds=seconds)
        records.append({"problem": PROBLEM.format(k=k), "answer": "positive" if task == "mosei" else "to greet",
                        "videos": [f"c{k}.mp4"]})
    split = tmp_path / "split.jsonl"
    split.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "run"
    argv = ["--config", str(ROOT / "configs" / f"{task}_rlce.yaml"), "--model_name_or_path", str(model),
            "--output_dir", str(out), "--train_file", str(split), "--media_root", str(media),
            "--max_steps", "2", "--save_steps", "2", "--save_only_model", "true", "--use_cpu", "true",
            "--bf16", "false", "--dtype", "float32", "--generation_batch_size", "4",
            "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1", "--num_generations", "2",
            "--max_completion_length", "4", "--rlce_construction_max_tokens", "4", "--rlce_validation_max_tokens",
            "2", "--rlce_equivalence_max_tokens", "4", "--rlce_tests_per_direction", "1", "--report_to", "none",
            "--log_completions", "false",
            # the recipe's co-located vLLM verifier needs a GPU (and vLLM's CPU build lives in its own venv): on CPU
            # the verifier runs on the transformers backend, as the recipe's comment says
            "--verifier_mode", "transformers"]
    monkeypatch.setattr(sys, "argv", ["train_hba.py", *argv])
    script = load_script()
    trainer = script.main(*script.make_parser().parse_args_and_config(argv))
    assert trainer.state.global_step == 2 and trainer.args.video_input == "video" and not trainer.args.use_vllm
    assert type(trainer.verifier).__name__ == "VisionLanguageVerifier"
    checkpoint = out / "checkpoint-2"
    assert (checkpoint / "model.safetensors").exists() or list(checkpoint.glob("*.safetensors"))

    evaluated = tmp_path / "eval"
    assert cli(["evaluate", "--model_name_or_path", str(checkpoint), "--hba_task", task, "--data", str(split),
                "--media_root", str(media), "--output_dir", str(evaluated), "--max_new_tokens", "3",
                "--batch_size", "2", "--backend", "transformers", "--no_progress"]) == 0
    summary = json.loads((evaluated / "summary.json").read_text())
    assert summary["complete"] and summary["num_rows"] == 2
