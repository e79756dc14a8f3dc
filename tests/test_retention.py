"""A long run stays bounded on disk: the evidence trail's rotation (`rlce_evidence_rotate`) and the completions
tables' cap (`rlce_completions_keep`), as plain files and in a real tiny GRPO run."""

import glob
import os

import pytest

from rlce_trl.audit import EvidenceLog, EvidenceRecorder
from rlce_trl.data.jsonl import read_jsonl, rotate_jsonl, rotated_paths
from rlce_trl.retention import prune_completions


def record(step: int, index: int, pad: int = 200) -> dict:
    return {"id": f"{step}-{index}", "step": step, "context": "x" * pad}


def steps_of(path) -> list[int]:
    return [r["step"] for r in read_jsonl(path)]


def test_rotation_keeps_the_newest_parts_and_bounds_the_disk(tmp_path):
    path = tmp_path / "rlce_evidence.jsonl"
    log = EvidenceLog(path, max_bytes=1000, rotate=2)
    written = sum(log.write([record(step, 0), record(step, 1)]) for step in range(1, 21))
    assert written == 40 and not log.limit_reached and log.rotations > 2
    parts = rotated_paths(path)
    assert [p.name for p in parts] == ["rlce_evidence.1.jsonl", "rlce_evidence.2.jsonl"]
    assert all(p.stat().st_size <= 1000 for p in [path, *parts])  # (rotate + 1) * max_bytes at most
    newest_first = [steps_of(path), *(steps_of(p) for p in parts)]
    assert newest_first[0][-1] == 20 and sorted(sum(newest_first[::-1], [])) == sum(newest_first[::-1], [])
    assert 1 not in sum(newest_first, [])  # the oldest records are gone


def test_without_rotation_the_trail_stops_with_its_marker(tmp_path):
    path = tmp_path / "e.jsonl"
    log = EvidenceLog(path, max_bytes=1000)
    for step in range(1, 10):
        log.write([record(step, 0)])
    rows = read_jsonl(path)
    assert rows[-1]["type"] == "limit" and not rotated_paths(path) and path.stat().st_size < 1200


def test_a_resume_drops_later_steps_from_every_part(tmp_path):
    path = tmp_path / "rlce_evidence.jsonl"
    log = EvidenceLog(path, max_bytes=800, rotate=3)
    for step in range(1, 13):
        log.write([record(step, 0)])
    recorder = EvidenceRecorder(path, "rlce", max_mb=800 / 1024 / 1024, rotate=3)
    recorder.write([record(5, 0)], completed_steps=4)  # resumed from checkpoint-4: every later step is redone
    remaining = sorted(s for p in [path, *rotated_paths(path)] for s in steps_of(p))
    assert remaining[-1] == 5 and remaining.count(5) == 1 and all(s <= 4 for s in remaining[:-1])
    assert 4 in remaining  # only later steps were dropped


def test_rotate_zero_removes_the_log(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"a": 1}\n')
    rotate_jsonl(path, 0)
    assert not path.exists() and not rotated_paths(path)


def test_prune_completions_keeps_the_newest(tmp_path):
    folder = tmp_path / "completions"
    folder.mkdir()
    for step in (1, 2, 10, 11):
        (folder / f"completions_{step:05d}.parquet").write_bytes(b"x")
    assert prune_completions(str(tmp_path), 2) == 2
    assert sorted(os.listdir(folder)) == ["completions_00010.parquet", "completions_00011.parquet"]
    assert prune_completions(str(tmp_path), 0) == 0


@pytest.mark.parametrize("field, value, message", [
    ("rlce_evidence_rotate", -1, "rlce_evidence_rotate=-1"),
    ("rlce_completions_keep", -3, "rlce_completions_keep=-3"),
])
def test_config_rejects_negative_retention(tmp_path, field, value, message):
    from testing_utils import tiny_grpo_args

    with pytest.raises(ValueError, match=message):
        tiny_grpo_args(tmp_path, **{field: value})


def test_config_rejects_rotation_without_a_size(tmp_path):
    from testing_utils import tiny_grpo_args

    with pytest.raises(ValueError, match="needs a size to rotate at"):
        tiny_grpo_args(tmp_path, rlce_evidence_rotate=2, rlce_evidence_max_mb=0)


@pytest.mark.slow
def test_a_real_run_rotates_its_trail_and_keeps_few_tables(tiny_model_dir, tmp_path):
    from datasets import Dataset
    from testing_utils import preference_rows, tiny_grpo_args

    from rlce_trl import RLCEGRPOTrainer

    args = tiny_grpo_args(tmp_path / "run", max_steps=4, per_device_train_batch_size=8, log_completions=True,
                          rlce_evidence_max_mb=4 / 1024, rlce_evidence_rotate=1, rlce_completions_keep=2)
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=Dataset.from_list(preference_rows(8)))
    trainer.train()
    path = os.path.join(args.output_dir, "rlce_evidence.jsonl")
    parts = rotated_paths(path)
    assert len(parts) == 1 and trainer.evidence.log.rotations >= 1
    assert all(os.path.getsize(p) <= 4096 for p in [path, *parts])
    assert steps_of(path)[-1] == 4
    tables = sorted(glob.glob(os.path.join(args.output_dir, "completions", "*.parquet")))
    assert [os.path.basename(t) for t in tables] == ["completions_00003.parquet", "completions_00004.parquet"]
