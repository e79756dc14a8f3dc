"""The one JSONL module (a reader tolerant of a cut last line and strict elsewhere; atomic writes, appends, resume
truncation) and the dataset row checks."""

from __future__ import annotations

import json

import pytest

from rlce_trl.data import jsonl
from rlce_trl.data.checks import check_datasets, check_rows
from rlce_trl.data.jsonl import (
    append_jsonl,
    read_jsonl,
    read_jsonl_counted,
    repair_jsonl_tail,
    truncate_jsonl,
    write_json,
    write_jsonl,
)
from rlce_trl.errors import InputError, MissingInputError


def test_a_cut_last_line_is_skipped_and_counted(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n{"a": 3, "b": "cut sho')
    rows, skipped = read_jsonl_counted(path)
    assert rows == [{"a": 1}, {"a": 2}] and skipped == 1
    assert read_jsonl(path) == rows


@pytest.mark.parametrize(
    "content, match",
    [
        ('{"a": 1}\nnot json\n{"a": 2}\n', "line 2 is not valid JSON"),
        ('{"a": 1}\n{"a": 2\n', "line 2 is not valid JSON"),  # ends with a newline: written whole, so it is an error
        ('[1, 2]\n', "line 1 is a JSON list"),
    ],
)
def test_bad_lines_elsewhere_name_the_line(tmp_path, content, match):
    path = tmp_path / "x.jsonl"
    path.write_text(content)
    with pytest.raises(InputError, match=match):
        read_jsonl(path)


def test_missing_folder_and_non_utf8(tmp_path):
    with pytest.raises(MissingInputError, match="does not exist"):
        read_jsonl(tmp_path / "nope.jsonl")
    with pytest.raises(MissingInputError, match="is a folder"):
        read_jsonl(tmp_path)
    (tmp_path / "latin.jsonl").write_bytes(b'{"a": "caf\xe9"}\n')
    with pytest.raises(InputError, match="not UTF-8"):
        read_jsonl(tmp_path / "latin.jsonl")


def test_repair_tail_cuts_a_fragment_and_keeps_a_whole_last_row(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": 1}\n{"id": 2, "resp')
    assert repair_jsonl_tail(path) == 1 and path.read_text() == '{"id": 1}\n'
    path.write_text('{"id": 1}\n{"id": 2}')  # whole row, newline missing: kept, newline added
    assert repair_jsonl_tail(path) == 0 and path.read_text() == '{"id": 1}\n{"id": 2}\n'
    assert repair_jsonl_tail(tmp_path / "absent.jsonl") == 0


def test_writes_are_atomic_a_failed_write_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "sub" / "rows.jsonl"
    assert write_jsonl(({"i": i, "t": "é"} for i in range(3)), path) == 3  # a generator, a new folder
    assert read_jsonl(path) == [{"i": i, "t": "é"} for i in range(3)] and "é" in path.read_text(encoding="utf-8")
    before = path.read_bytes()

    def rows():
        yield {"i": 9}
        raise KeyboardInterrupt  # killed halfway through writing

    with pytest.raises(KeyboardInterrupt):
        write_jsonl(rows(), path)
    assert path.read_bytes() == before and sorted(p.name for p in path.parent.iterdir()) == ["rows.jsonl"]
    write_json({"score": 0.5}, tmp_path / "summary.json")
    assert json.loads((tmp_path / "summary.json").read_text()) == {"score": 0.5}
    monkeypatch.setattr(jsonl.os, "replace", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        write_json({"score": 0.9}, tmp_path / "summary.json")
    assert json.loads((tmp_path / "summary.json").read_text()) == {"score": 0.5}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub", "summary.json"]  # no temporary file left


def test_append_and_resume_truncation(tmp_path):
    path = tmp_path / "log" / "steps.jsonl"
    assert append_jsonl([], path) == 0 and path.read_text() == ""  # the log exists from the first call
    append_jsonl([{"step": 1}, {"step": 2}], path, fsync=True)
    append_jsonl([{"step": 3}], path)
    with path.open("a") as f:
        f.write('{"step": 4, "cut')  # a kill mid-append
    inode = path.stat().st_ino
    assert truncate_jsonl(path, lambda r: r["step"] <= 2) == 2  # step 3 and the cut line
    assert read_jsonl(path) == [{"step": 1}, {"step": 2}]
    assert path.stat().st_ino != inode  # rewritten by a rename, never in place
    assert truncate_jsonl(path, lambda r: True) == 0 and truncate_jsonl(tmp_path / "absent.jsonl", bool) == 0
    with pytest.raises(ValueError):
        append_jsonl([{"x": float("nan")}], path, allow_nan=False)


GOOD = {"prompt": [{"role": "user", "content": "hi"}], "answer_options": ["a", "b"]}


@pytest.mark.parametrize(
    "row, problem",
    [
        ({"answer_options": ["a"]}, "no `prompt` field"),
        ({"prompt": "   "}, "empty string"),
        ({"prompt": []}, "empty list"),
        ({"prompt": None}, "missing (None)"),
        ({"prompt": [{"role": "user", "content": 5}]}, "`content` of type int"),
        ({"prompt": [{"role": "user", "content": ""}]}, "every message of `prompt` is empty"),
        ({"prompt": [{"content": "x"}]}, "no `role`"),
        ({"prompt": "q", "answer_options": [1, 2]}, "every label must be a non-empty string"),
        ({"prompt": "q", "answer_options": "ab"}, "is a str; give a list"),
    ],
)
def test_bad_rows_name_the_row_and_the_fix(row, problem):
    with pytest.raises(InputError) as info:
        check_rows([GOOD, GOOD, row], "train_dataset")
    message = str(info.value)
    assert "row 2:" in message and problem in message and "Fix:" in message and "\n" not in message


def test_good_rows_pass_and_free_text_and_media_are_fine():
    check_rows([GOOD, {"prompt": "q", "answer_options": []}, {"prompt": "q"},
                {"prompt": [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "why?"}]}]}])


def test_many_bad_rows_are_summarised():
    with pytest.raises(InputError, match=r"has 9 unusable row\(s\) \(and 4 more rows\)"):
        check_rows([{"prompt": ""}] * 9)


def test_the_trainer_checks_its_datasets_before_loading_anything(tmp_path):
    from datasets import Dataset

    from rlce_trl import RLCEGRPOConfig, RLCEGRPOTrainer

    args = RLCEGRPOConfig(str(tmp_path), bf16=False, use_cpu=True, report_to="none", num_generations=2,
                          per_device_train_batch_size=2)
    bad = Dataset.from_list([{"prompt": "fine", "answer_options": ["a", "b"]},
                             {"prompt": "", "answer_options": ["a", "b"]}])
    with pytest.raises(InputError, match="train_dataset has 1 unusable row.*row 1: `prompt` is an empty string"):
        RLCEGRPOTrainer(str(tmp_path / "model-never-loaded"), args=args, train_dataset=bad)
    with pytest.raises(InputError, match=r"eval_dataset\['x'\].*row 0"):
        check_datasets(None, {"x": [{"prompt": "q", "answer_options": [1]}]})
    assert json.dumps(GOOD)
