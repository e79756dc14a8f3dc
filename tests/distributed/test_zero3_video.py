"""A 2-process video run under DeepSpeed ZeRO-3 (`configs/accelerate/zero3.yaml`, gloo, CPU): the IntentQA video
recipe on the tiny random Qwen3.5 VLM with the transformers verifier. Prompts travel between the ranks as clip
references; the ranks score different groups, so their frozen verifiers make different numbers of `generate` calls
(before the fix those calls synchronised under ZeRO-3 and the run hung at the first such step)."""

import json
import os
import sys
from pathlib import Path

import pytest
from launching import run_or_fail
from testing_utils import free_port

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PROBLEM = "<video>\n<audio>\nTranscript: clip {k}\nWhat is the intent of the speaker in this video?"

pytestmark = [pytest.mark.vlm, pytest.mark.slow]


def test_video_recipe_two_processes_zero3_with_the_transformers_verifier(tmp_path):
    pytest.importorskip("deepspeed")
    pytest.importorskip("torchvision")
    pytest.importorskip("av")
    from testing_utils import build_tiny_vlm, make_video

    model = build_tiny_vlm(tmp_path / "tiny-vlm")
    media = tmp_path / "media"
    media.mkdir()
    records = []
    for k, seconds in enumerate((3, 4, 5)):  # 3 prompts x G=2 over 2 ranks: rank 0 scores two groups, rank 1 one
        make_video(media / f"c{k}.mp4", seconds=seconds)
        records.append({"problem": PROBLEM.format(k=k), "answer": "to greet", "videos": [f"c{k}.mp4"]})
    split = tmp_path / "split.jsonl"
    split.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1", TRANSFORMERS_VERBOSITY="error",
               PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), str(ROOT / "tests" / "entrypoints"),
                                                        str(ROOT / "tests"), env.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
           str(ROOT / "configs" / "accelerate" / "zero3.yaml"), "--num_processes", "2", "--mixed_precision", "no",
           "--main_process_port", str(free_port()), str(HERE / "zero3_video_run.py"),
           "--config", str(ROOT / "configs" / "intentqa_rlce.yaml"), "--model_name_or_path", str(model),
           "--output_dir", str(out), "--train_file", str(split), "--media_root", str(media),
           "--max_steps", "2", "--save_strategy", "no", "--use_cpu", "false", "--ddp_backend", "gloo",
           "--bf16", "false", "--dtype", "float32", "--generation_batch_size", "6",
           "--per_device_train_batch_size", "3", "--gradient_accumulation_steps", "1", "--num_generations", "2",
           "--max_completion_length", "4", "--rlce_construction_max_tokens", "4", "--rlce_validation_max_tokens",
           "2", "--rlce_equivalence_max_tokens", "4", "--rlce_tests_per_direction", "1", "--report_to", "none",
           "--log_completions", "false", "--activation_checkpointing", "false",
           # the recipe's co-located vLLM verifier needs a GPU: the transformers backend, as the recipe's comment says
           "--verifier_mode", "transformers"]
    done = run_or_fail(cmd, env, timeout=360, cwd=ROOT)  # about 90 s here; before the fix: a hang
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    for r in ranks:
        assert r["steps"] == 2 and r["zero_stage"] == 3
        assert r["verifier"] == "VisionLanguageVerifier" and not r["verifier_zero3"]  # whole copy, every rank
        assert r["scored"] and all(g["has_clip_reference"] for g in r["scored"])  # clips travel as references
    # 3 groups per step, each scored once: two by rank 0, one by rank 1
    assert [len(r["scored"]) for r in ranks] == [4, 2]
    # the situation that hung: the ranks' verifiers made different numbers of generate calls
    assert ranks[0]["verifier_generate_calls"] != ranks[1]["verifier_generate_calls"]
