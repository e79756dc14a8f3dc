"""HBA video rows through a REAL vision-language processor and model: a tiny random Qwen3.5 (the paper's policy
architecture) with the Qwen3-VL processor, built locally. Checks the frames the row builder writes are what the
processor takes (grid, timestamps), that batched greedy generation equals one-by-one, and `rlce-trl evaluate` on
video rows end to end, resume included.

transformers' video processors need torchvision: `make setup` installs one torch / torchvision pair into `.venv`, and
`make test` runs these tests there (`make test-vlm` runs them alone).
"""

from __future__ import annotations

import json
import re

import pytest
from testing_utils import build_tiny_vlm, make_video

from rlce_trl.cli import main
from rlce_trl.data.hba import expand_videos, load_hba_split
from rlce_trl.generation.generators import VisionLanguageGenerator, make_generator

pytestmark = pytest.mark.vlm
pytest.importorskip("torchvision")
pytest.importorskip("av")

PROBLEM = "<video>\n<audio>\nTranscript: {text}\nWhat is the sentiment of the speaker in this video?"
CLIPS = {"c4.mp4": 4, "c6.mp4": 6, "c12.mp4": 12}  # seconds at 10 fps -> 4, 6 and 8 frames at 1 fps


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory):
    return build_tiny_vlm(tmp_path_factory.mktemp("tiny-vlm"))


@pytest.fixture(scope="module")
def hba_split(tmp_path_factory):
    """A MOSEI-shaped HBA split (JSONL) and its media root with three generated clips."""
    root = tmp_path_factory.mktemp("hba")
    (root / "media" / "mosei").mkdir(parents=True)
    records = []
    for k, (name, seconds) in enumerate(CLIPS.items()):
        make_video(root / "media" / "mosei" / name, seconds=seconds)
        records.append(
            {"problem": PROBLEM.format(text=f"clip {k} was fine"), "answer": "positive", "videos": [f"mosei/{name}"]}
        )
    split = root / "test.jsonl"
    split.write_text("".join(json.dumps(r) + "\n" for r in records))
    return split, root / "media"


@pytest.fixture(scope="module")
def generator(tiny_vlm):
    return VisionLanguageGenerator.from_pretrained(str(tiny_vlm), max_new_tokens=6, batch_size=3)


def test_processor_takes_the_rows_frames(hba_split, generator):
    split, media = hba_split
    prompts = [expand_videos(row, media)["prompt"] for row in load_hba_split(split, "mosei", "test")]
    batch = generator.encode(prompts)
    # 4 / 6 / 8 frames of 176x320: 2 frames per temporal patch, 176 rounded to 192 on the 32-pixel grid (paper, app. A)
    assert batch["video_grid_thw"].tolist() == [[2, 12, 20], [3, 12, 20], [4, 12, 20]]
    video_token = generator.processor.video_token_id
    per_row = (batch["input_ids"] == video_token).sum(dim=1).tolist()
    assert per_row == [t * h * w // 4 for t, h, w in batch["video_grid_thw"].tolist()]  # 2x2 merge
    # the timestamps come from the clip's own rate (10 fps), not the processor's 24-fps guess
    text = generator.processor.tokenizer.decode(batch["input_ids"][2]).replace("<|video_pad|>", "")
    stamps = [float(s) for s in re.findall(r"<([0-9.]+) seconds>", text)]
    assert len(stamps) == 4 and stamps == sorted(stamps) and 10.5 < stamps[-1] < 12.0
    assert "<audio>" not in text and "Options: highly negative" in text


def test_batched_greedy_equals_one_by_one(hba_split, generator):
    split, media = hba_split
    prompts = [expand_videos(row, media)["prompt"] for row in load_hba_split(split, "mosei", "test")]
    batched = generator(prompts)
    assert batched == [generator([p])[0] for p in prompts]  # left padding and per-row video positions are right
    assert all(isinstance(r, str) for r in batched)


def test_evaluate_cli_on_video_rows_and_resume(hba_split, tiny_vlm, tmp_path, capsys):
    split, media = hba_split
    out = tmp_path / "out"
    args = [
        "evaluate", "--model_name_or_path", str(tiny_vlm), "--hba_task", "mosei", "--data", str(split),
        "--media_root", str(media), "--output_dir", str(out), "--max_new_tokens", "4", "--batch_size", "2",
        "--no_progress",
    ]  # fmt: skip
    assert main(args) == 0
    lines = (out / "predictions.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["id"] for r in records] == ["mosei/test/0", "mosei/test/1", "mosei/test/2"]
    assert all(r["gold"] == "positive" and isinstance(r["response"], str) for r in records)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] and summary["num_rows"] == 3 and summary["metric"] and summary["score"] is not None
    # an interruption that lost the last row: the same command generates only that row, with the same greedy answer
    (out / "predictions.jsonl").write_text("\n".join(lines[:2]) + "\n")
    assert main(args) == 0
    assert (out / "predictions.jsonl").read_text().splitlines() == lines

    capsys.readouterr()
    assert main([a for a in args if a != str(media) and a != "--media_root"]) == 2
    assert "--media_root" in capsys.readouterr().err


def test_vllm_backend_is_refused_for_video_rows(tiny_vlm):
    with pytest.raises(ValueError, match="--backend transformers"):
        make_generator(str(tiny_vlm), "vllm", video=True)


def test_checkpoint_selection_validates_video_rows(hba_split, generator, tmp_path):
    """The best-on-validation callback's validate function on video rows, with the policy and its processor."""
    from rlce_trl.evaluation.callbacks import make_validation_fn

    split, media = hba_split
    rows = load_hba_split(split, "mosei", "validation")
    with pytest.raises(ValueError, match="media_root"):
        make_validation_fn(rows, tmp_path / "v")
    validate = make_validation_fn(rows, tmp_path / "v", max_new_tokens=3, batch_size=2, media_root=media)
    score = validate(generator.model, generator.processor, step=2)
    assert isinstance(score, float) and 0.0 <= score <= 1.0
    assert len((tmp_path / "v" / "step-2" / "predictions.jsonl").read_text().splitlines()) == 3
