import json

import pytest
from testing_utils import make_video

from rlce_trl.data.hba import (
    MOSEI_LABELS,
    URFUNNY_LABELS,
    build_hba_row,
    clean_problem,
    expand_videos,
    frame_indices,
    load_hba_split,
    num_sampled_frames,
    options_line,
    read_video_frames,
    with_frames,
)

av = pytest.importorskip("av")
np = pytest.importorskip("numpy")
pytest.importorskip("PIL")

MOSEI_PROBLEM = "<video>\n<audio>\nTranscript: well it was fine I guess\nWhat is the sentiment of the speaker?"
INTENT_PROBLEM = "<video>\n<audio>\nWhy did the man open the door?"


@pytest.mark.parametrize(
    "total, fps, expected",
    [
        (10, 10.0, 2),  # 1 s -> 1 frame -> clamped up to 2
        (50, 10.0, 4),  # 5 s -> 5 -> even, 4
        (60, 10.0, 6),  # 6 s -> 6
        (300, 30.0, 8),  # 10 s -> clamped to 8
        (3, 1.0, 2),  # 3 frames: at most 3, even, 2
        (1, 25.0, 2),  # one frame: repeated
    ],
)
def test_number_of_frames(total, fps, expected):
    assert num_sampled_frames(total, fps) == expected


def test_frame_indices_cover_the_clip():
    assert frame_indices(50, 4) == [0, 16, 33, 49]
    assert frame_indices(1, 2) == [0, 0]


def test_clean_problem_and_options():
    assert clean_problem(MOSEI_PROBLEM) == (
        "<video>\nTranscript: well it was fine I guess\nWhat is the sentiment of the speaker?"
    )
    assert "<audio>" not in clean_problem("<audio>\n<video>\nQ?")
    assert options_line(URFUNNY_LABELS) == "Options: humour, not humour."


def test_closed_label_row():
    row = build_hba_row({"problem": MOSEI_PROBLEM, "answer": "weakly negative", "videos": ["a/b.mp4"]}, "mosei", 0)
    assert row["task"] == "mosei" and row["answer_options"] == list(MOSEI_LABELS)
    system, user = row["prompt"]
    assert system["role"] == "system" and user["role"] == "user"
    assert user["content"][0]["type"] == "video"
    text = user["content"][1]["text"]
    assert "<audio>" not in text and "<video>" not in text
    assert text.endswith(options_line(MOSEI_LABELS))
    assert row["gold"] == "weakly negative" and row["videos"] == ["a/b.mp4"]
    train = build_hba_row({"problem": MOSEI_PROBLEM, "answer": "negative", "videos": ["x.mp4"]}, "mosei", 0, "train")
    assert "gold" not in train


def test_free_text_row_has_no_options():
    row = build_hba_row({"problem": INTENT_PROBLEM, "answer": "to let the dog in", "videos": "c.mp4"}, "intentqa", 3)
    assert row["answer_options"] == [] and row["question"] == "Why did the man open the door?"
    assert row["prompt"][1]["content"][-1]["text"] == "Why did the man open the door?"
    with pytest.raises(ValueError, match="placeholders"):
        build_hba_row({"problem": "<video>\nQ", "answer": "a", "videos": []}, "intentqa", 0)
    with pytest.raises(ValueError, match="Unknown HBA task"):
        build_hba_row({"problem": "Q", "answer": "a"}, "mmlu", 0)


def test_frames_from_generated_video(tmp_path):
    make_video(tmp_path / "clip.mp4", seconds=5)
    frames = read_video_frames(tmp_path / "clip.mp4")
    assert len(frames) == 4
    assert all(f.size == (320, 176) and f.mode == "RGB" for f in frames)  # PIL size is (width, height)
    levels = [int(np.asarray(f).mean()) for f in frames]
    assert levels == sorted(levels) and levels[0] < 20 and levels[-1] > 200  # first and last frames taken
    long = read_video_frames(make_video(tmp_path / "long.mp4", seconds=12, fps=5))
    short = read_video_frames(make_video(tmp_path / "short.mp4", seconds=0.5))
    assert (len(long), len(short)) == (8, 2)
    with pytest.raises(FileNotFoundError, match="media root"):
        read_video_frames(tmp_path / "missing.mp4")


def test_expand_rows_and_dataset_view(tmp_path):
    media = tmp_path / "media"
    (media / "mosei").mkdir(parents=True)
    make_video(media / "mosei" / "c1.mp4", seconds=3)
    split = tmp_path / "test.jsonl"
    split.write_text(json.dumps({"problem": MOSEI_PROBLEM, "answer": "positive", "videos": ["mosei/c1.mp4"]}) + "\n")
    rows = load_hba_split(split, "mosei", "test")
    expanded = expand_videos(rows[0], media)
    block = expanded["prompt"][1]["content"][0]
    assert block["type"] == "video" and len(block["video"]) == 2
    # what a processor needs for frame timestamps: the source rate and the indices taken (3 s at 10 fps)
    assert block["metadata"] == {
        "fps": 10.0, "total_num_frames": 30, "duration": 3.0, "frames_indices": [0, 29], "height": 176, "width": 320
    }
    assert rows[0]["prompt"][1]["content"][0] == {"type": "video", "text": None}  # the row itself is untouched

    from datasets import Dataset

    view = with_frames(Dataset.from_list(rows), media)
    assert len(view[0]["prompt"][1]["content"][0]["video"]) == 2
