"""`prepare-prefeval` on a damaged checkout or an unusable output folder: one line naming the file and the fix,
exit 2, and no partial output (issue 13). The checkout is the synthetic one of conftest.py."""

from __future__ import annotations

import json
import os
import random

import pytest
from testing_utils import mutate

from rlce_trl.cli import main


def _run(capsys, *argv):
    code = main(["prepare-prefeval", *map(str, argv)])
    err = capsys.readouterr().err
    return code, err


def _assert_one_line(code, err, *words):
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    for word in words:
        assert word in err


def test_a_corrupted_topic_file_is_named(fake_prefeval, tmp_path, capsys):
    path = fake_prefeval / "benchmark_dataset" / "implicit_preference" / "choice-based" / "garden_plants.json"
    path.write_text(path.read_text()[:50])
    code, err = _run(capsys, "--prefeval_dir", fake_prefeval, "--output_dir", tmp_path / "out")
    _assert_one_line(code, err, "garden_plants.json", "not valid JSON", "restore it")
    assert not (tmp_path / "out" / "explicit").exists()  # all or nothing


def test_a_non_utf8_file_is_named(fake_prefeval, tmp_path, capsys):
    path = fake_prefeval / "benchmark_dataset" / "filtered_inter_turns.json"
    path.write_bytes(b"\xff\xfe" + path.read_bytes())
    code, err = _run(capsys, "--prefeval_dir", fake_prefeval, "--output_dir", tmp_path / "out")
    _assert_one_line(code, err, "filtered_inter_turns.json", "not UTF-8")


def test_a_record_without_the_benchmark_fields_is_named(fake_prefeval, tmp_path, capsys):
    path = fake_prefeval / "benchmark_dataset" / "explicit_preference" / "cooking_tools.json"
    path.write_text(path.read_text().replace('"preference"', '"pref"', 1))
    code, err = _run(capsys, "--prefeval_dir", fake_prefeval, "--output_dir", tmp_path / "out")
    _assert_one_line(code, err, "cooking_tools.json record 0", "PrefEval's fields")


def test_a_form_with_no_topic_files(fake_prefeval, tmp_path, capsys):
    for path in (fake_prefeval / "benchmark_dataset" / "explicit_preference").glob("*.json"):
        path.unlink()
    code, err = _run(capsys, "--prefeval_dir", fake_prefeval, "--output_dir", tmp_path / "out")
    _assert_one_line(code, err, "no topic files")
    assert not any((tmp_path / "out").rglob("*.jsonl"))


def test_an_output_folder_that_is_a_file(fake_prefeval, tmp_path, capsys):
    (tmp_path / "out").write_text("I am a file")
    code, err = _run(capsys, "--prefeval_dir", fake_prefeval, "--output_dir", tmp_path / "out")
    _assert_one_line(code, err, "is a file")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores file permissions")
def test_a_read_only_output_folder(fake_prefeval, tmp_path, capsys):
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o500)
    try:
        code, err = _run(capsys, "--prefeval_dir", fake_prefeval, "--output_dir", out)
    finally:
        out.chmod(0o700)
    _assert_one_line(code, err, "writable")
    assert not any(out.iterdir())


def test_no_checkout_at_all(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PREFEVAL_DIR", raising=False)
    code, err = _run(capsys, "--output_dir", tmp_path / "out")
    _assert_one_line(code, err, "git clone https://github.com/amazon-science/PrefEval")


def test_a_missing_checkout_is_blamed_not_the_output_folder(tmp_path, capsys):
    code, err = _run(capsys, "--prefeval_dir", tmp_path / "nowhere", "--output_dir", tmp_path / "out")
    _assert_one_line(code, err, "is not a PrefEval checkout", "--prefeval_dir")
    assert "--output_dir" not in err.split("(")[0] and not (tmp_path / "out").exists()


def test_a_rerun_replaces_the_output_whole(fake_prefeval, tmp_path, capsys):
    assert _run(capsys, "--prefeval_dir", fake_prefeval, "--output_dir", tmp_path / "out")[0] == 0
    (tmp_path / "out" / "explicit" / "stale.jsonl").write_text("{}\n")
    assert _run(capsys, "--prefeval_dir", fake_prefeval, "--output_dir", tmp_path / "out")[0] == 0
    assert not (tmp_path / "out" / "explicit" / "stale.jsonl").exists()
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".prepare-")]


def test_fuzzed_prepare_prefeval_checkouts(fake_prefeval, tmp_path, capsys):
    rng = random.Random(11)
    files = sorted(fake_prefeval.rglob("*.json"))
    for case in range(12):
        path = rng.choice(files)
        original = path.read_bytes()
        data = json.loads(original)
        path.write_text(json.dumps(mutate(rng, data)) if rng.random() < 0.7 else original.decode()[: rng.randrange(
            1, len(original))])
        try:
            code, err = _run(capsys, "--prefeval_dir", fake_prefeval, "--output_dir", tmp_path / f"out{case}")
        finally:
            path.write_bytes(original)
        assert code == 0 or code == 2 and err.startswith("error: ") and err.count("\n") == 1, err


def test_an_output_folder_that_cannot_be_created(fake_prefeval, tmp_path, capsys):
    (tmp_path / "file").write_text("x")  # works as root too: nothing can be created under a file
    code, err = _run(capsys, "--prefeval_dir", fake_prefeval, "--output_dir", tmp_path / "file" / "out")
    _assert_one_line(code, err, "cannot write to --output_dir", "writable folder")
