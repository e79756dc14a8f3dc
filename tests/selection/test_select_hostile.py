"""Hostile flags and files for `rlce-trl sample` / `rlce-trl select`: every one ends in one line (`error: ...`, exit
2) or is counted and reported, never a traceback. Pools are written by hand (no model); the selector that fails on a
row runs on a FAKE verifier (tests/fakes.py) that raises for that row."""

from __future__ import annotations

import argparse
import json

import pytest
from fakes import ScriptedVerifier

from rlce_trl.cli import main, sample, select
from rlce_trl.generation.generators import Sampled


def _row(rid, answers, gold="a", prompt="Which one?"):
    return {"id": rid, "prompt": [{"role": "user", "content": prompt}], "answer_options": ["a", "b"], "gold": gold,
            "greedy": {"text": f"\\boxed{{{answers[0]}}}"},
            "candidates": [{"text": f"\\boxed{{{a}}}", "token_logprobs": [-0.1]} for a in answers]}


@pytest.fixture
def pool(tmp_path):
    path = tmp_path / "pool"
    path.mkdir()
    rows = [_row("r0", ["a", "b", "a", "b"]), _row("r1", ["b", "a"], prompt="BOOM which one?"),
            _row("r2", ["a", "a", "b", "b"], gold="b")]
    (path / "pool.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _one_line_error(capsys, argv, *needles):
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err
    assert "Traceback" not in captured.err + captured.out
    for needle in needles:
        assert needle in err, err
    return err


SAMPLE_CASES = [
    (["--vllm_kwargs", "{max_model_len: 1}"], ["--vllm_kwargs: not JSON", "max_model_len"]),
    (["--vllm_kwargs", "[1, 2]"], ["give a JSON object"]),
    (["--n", "0", "--top_p", "2"], ["--n 0"]),  # argparse stops at the first bad count
    (["--limit", "-1"], ["--limit -1"]),
    (["--max_new_tokens", "0", "--top_k", "-1"], ["--max_new_tokens 0"]),  # argparse stops at the first bad count
    (["--top_k", "-1", "--temperature", "nan"], ["--top_k -1"]),
    (["--temperature", "nan", "--top_p", "2"], ["--temperature", "--top_p"]),
    (["--video_fps", "0", "--video_min_frames", "9"], ["--video_fps=0", "video_max_frames"]),
    (["--media_root", "/nowhere/at/all"], ["--media_root '/nowhere/at/all': no such folder"]),
    (["--video_fps", "nan", "--temperature", "inf"], ["--video_fps nan", "--temperature inf"]),
]


@pytest.mark.parametrize(("extra", "needles"), SAMPLE_CASES)
def test_sample_flags_end_in_one_line(extra, needles, tmp_path, capsys):
    argv = ["sample", "--model_name_or_path", str(tmp_path / "no-model"), "--synthetic", "2", "--output_dir",
            str(tmp_path / "out"), *extra]
    _one_line_error(capsys, argv, *needles)


def test_sample_files_end_in_one_line(tmp_path, capsys):
    base = ["sample", "--model_name_or_path", str(tmp_path / "no-model"), "--output_dir", str(tmp_path / "out")]
    _one_line_error(capsys, [*base, "--data", str(tmp_path / "missing.jsonl")], "no such file")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "prompt": "x"}\n{oops\n{"id": 2, "prompt": "y"}\n')
    _one_line_error(capsys, [*base, "--data", str(bad)], "line 2 is not valid JSON")
    bad.write_bytes(b"\xff\xfe\x00junk\n")
    _one_line_error(capsys, [*base, "--data", str(bad)], "not UTF-8")
    bad.write_text(json.dumps({"problem": "<video>\nq", "answer": "x", "videos": ["c.mp4"]}) + "\n")
    _one_line_error(capsys, [*base, "--data", str(bad)], "pass --hba_task")
    _one_line_error(capsys, [*base, "--synthetic", "1"], "no-model", "is not a folder")
    (tmp_path / "file").write_text("x")
    _one_line_error(capsys, [*base[:-1], str(tmp_path / "file"), "--synthetic", "1"], "is a file")
    model = tmp_path / "empty-model"
    model.mkdir()
    _one_line_error(capsys, ["sample", "--model_name_or_path", str(model), "--synthetic", "1", "--output_dir",
                             str(tmp_path / "out")], "cannot load --model_name_or_path")


def test_sample_resume_refuses_another_synthetic_style(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    sample.add_arguments(parser)
    argv = ["--model_name_or_path", "unused", "--synthetic", "2", "--output_dir", str(tmp_path / "out"), "--n", "1",
            "--diversify", "off"]  # only the style differs
    sampler = lambda prompts, specs: [[Sampled("x", [-0.1])] * len(specs) for _ in prompts]  # noqa: E731 - FAKE
    assert sample.main(parser.parse_args(argv), sampler=sampler) == 0
    with pytest.raises(ValueError, match=r"other settings \(style\)"):
        sample.main(parser.parse_args([*argv, "--style", "boxed"]), sampler=sampler)


def test_sample_counts_malformed_rows_and_guards_a_corrupt_settings_file(tmp_path, capsys):
    def fake_sampler(prompts, specs):  # a FAKE sampler: real ones are tested with real models elsewhere
        assert all(isinstance(p, list) and p[0]["role"] == "user" for p in prompts)  # string prompts wrapped
        return [[Sampled("\\boxed{a}", [-0.1])] * len(specs) for _ in prompts]

    rows = [{"id": 1, "prompt": "plain text"}, {"id": 2, "prompt": {"role": "user"}},
            {"id": 3, "prompt": "x", "answer_options": "a,b"}, {"id": 4, "prompt": "y", "num_frames": "eight"}]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    parser = argparse.ArgumentParser()
    sample.add_arguments(parser)
    args = parser.parse_args(["--model_name_or_path", "unused", "--data", str(data), "--output_dir",
                              str(tmp_path / "out"), "--n", "2"])
    assert sample.main(args, sampler=fake_sampler) == 0
    counts = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert counts["sampled"] == 1 and counts["skipped_malformed"] == 3
    for broken in ("{not json", "[1, 2]"):  # not JSON; JSON but not an object
        (tmp_path / "out" / "sample_settings.json").write_text(broken)
        args = parser.parse_args(["--model_name_or_path", "unused", "--data", str(data), "--output_dir",
                                  str(tmp_path / "out"), "--n", "2"])
        with pytest.raises(ValueError, match="sample_settings.json is unreadable: restore it"):
            sample.main(args, sampler=fake_sampler)


SELECT_CASES = [
    (["--selectors", ""], ["--selectors", "empty"]),
    (["--selectors", "majority,best"], ["unknown best", "choose from"]),
    (["--budgets", "1,x"], ["--budgets '1,x'", "comma-separated integers"]),
    (["--budgets", "0,2"], ["use 1 or more"]),
    (["--budgets", "9"], ["no row has 9 candidates", "pool sizes [2, 4]"]),
    (["--subsets", "0", "--chunk_size", "0"], ["--subsets 0"]),  # argparse stops at the first bad count
    (["--chunk_size", "0"], ["--chunk_size 0"]),
    (["--elect_think_range", "64"], ["LO,HI"]),
    (["--elect_think_range", "100,10"], ["think_range=(100, 10): need lo < hi"]),
    (["--elect_gamma", "2", "--elect_delta", "-1"], ["--elect_gamma 2", "--elect_delta -1"]),
    (["--rlce_tests_per_direction", "0"], ["--rlce_tests_per_direction 0"]),
    (["--selectors", "majority,rlce"], ["need --verifier_model_name_or_path"]),
]


@pytest.mark.parametrize(("extra", "needles"), SELECT_CASES)
def test_select_flags_end_in_one_line(extra, needles, pool, tmp_path, capsys):
    _one_line_error(capsys, ["select", "--pool", str(pool), "--output_dir", str(tmp_path / "sel"), *extra], *needles)


def test_select_files_end_in_one_line(pool, tmp_path, capsys):
    out = ["--output_dir", str(tmp_path / "sel")]
    _one_line_error(capsys, ["select", "--pool", str(tmp_path / "nowhere"), *out], "No pool at")
    (tmp_path / "empty").mkdir()
    _one_line_error(capsys, ["select", "--pool", str(tmp_path / "empty"), *out], "rlce-trl sample")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00\x01\n\x89PNG\n")
    _one_line_error(capsys, ["select", "--pool", str(binary), *out], "no readable rows", "not UTF-8")
    junk = tmp_path / "junk.jsonl"
    junk.write_text('[1, 2]\n"text"\n{"id": "x", "prompt": "p", "candidates": [{"text": 3}]}\n')
    _one_line_error(capsys, ["select", "--pool", str(junk), *out], "3 unreadable lines")
    junk.write_text(json.dumps({"id": "x", "prompt": "p", "candidates": []}) + "\n")
    _one_line_error(capsys, ["select", "--pool", str(junk), *out], "has candidates")
    (tmp_path / "a-file").write_text("x")
    _one_line_error(capsys, ["select", "--pool", str(pool), "--output_dir", str(tmp_path / "a-file")], "is a file")
    _one_line_error(capsys, ["select", "--pool", str(pool), *out, "--selectors", "rlce",
                             "--verifier_model_name_or_path", str(tmp_path / "no-model")], "no-model")
    assert main(["select", "--pool", str(pool), *out, "--selectors", "majority"]) == 0
    _one_line_error(capsys, ["select", "--pool", str(pool), *out, "--selectors", "majority,oracle"],
                    "other settings (selectors)", "another --output_dir")


def test_bad_rows_pool_sizes_and_a_failing_selector_are_counted_and_reported(pool, tmp_path, capsys):
    lines = (pool / "pool.jsonl").read_text().splitlines()
    extra = [
        json.dumps({**json.loads(lines[0]), "id": "bad-gold", "gold": {"x": 1}}),
        json.dumps({**json.loads(lines[0]), "id": "bad-evidence", "evidence": ["one"]}),
        json.loads(json.dumps(lines[0])),  # r0 again: the first copy is kept
        "{cut",
    ]
    (pool / "pool.jsonl").write_text("\n".join(lines + extra) + "\n")

    def reply(request):  # a FAKE verifier: raises on row r1's requests, says "yes" elsewhere
        if "BOOM" in json.dumps(request.messages):
            raise RuntimeError("backend fell over\nsecond line")
        return "yes"

    parser = argparse.ArgumentParser()
    select.add_arguments(parser)
    args = parser.parse_args(["--pool", str(pool), "--output_dir", str(tmp_path / "sel"), "--selectors",
                              "majority,rlce,elect,oracle,majority", "--budgets", "2,4", "--subsets", "1"])
    assert select.main(args, verifier=ScriptedVerifier(reply)) == 0
    printed = capsys.readouterr().out
    summary = json.loads((tmp_path / "sel" / "summary.json").read_text())
    assert summary["rows"] == 3 and summary["pool_sizes"] == [2, 4]
    problems = summary["unreadable_pool_lines"]
    assert len(problems) == 4 and any("gold" in p for p in problems) and any("evidence" in p for p in problems)
    assert any("row r0 again" in p for p in problems)
    failed = summary["selector_failures"]["rlce"]
    assert failed["rows"] == 1 and failed["first"] == "RuntimeError: backend fell over"
    assert summary["selectors"]["rlce"]["budgets"]["2"]["errors"] == 1
    assert summary["selectors"]["majority"]["budgets"]["4"]["rows_short"] == 1  # r1 has 2 candidates
    records = [json.loads(line) for line in (tmp_path / "sel" / "selections.jsonl").read_text().splitlines()]
    assert [len(r["results"]["majority"]["4"]) for r in records if r["id"] != "r1"] == [1, 1]  # a repeated name: once
    assert "selector rlce failed on 1 rows" in printed and "b=4: 1" in printed
    assert set(summary["selector_failures"]) == {"rlce"}  # only the failing selector is reported


def test_select_takes_the_task_file_the_pool_was_sampled_from(tmp_path, capsys):
    """`rlce-trl select --task FILE`: the pool's rows are checked against the task (its name, labels, gold) and the
    summary names it; a pool of another task, other labels or a judge-scored task is one line."""
    (tmp_path / "rows.jsonl").write_text('{"q": "pick", "label": "a"}\n')
    spec = "name: pick\ndata: {test: rows.jsonl}\nprompt: '{q}'\nlabels: [a, b]\ngold: label\n"
    (tmp_path / "pick.yaml").write_text(spec)
    task = str(tmp_path / "pick.yaml")
    rows = [{**_row("r0", ["a", "b", "a"]), "task": "pick"}, {**_row("r1", ["b", "b", "a"], gold="b"), "task": "pick"}]
    (tmp_path / "pool.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "sel"
    argv = ["select", "--pool", str(tmp_path / "pool.jsonl"), "--output_dir", str(out), "--selectors", "majority"]
    assert main([*argv, "--task", task]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["task"] == {"name": "pick", "display_name": "pick", "metric": "accuracy"}
    assert summary["selectors"]["majority"]["budgets"]["3"]["accuracy"] == 1.0
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({**rows[0], "task": "parity"}) + "\n")
    _one_line_error(capsys, ["select", "--pool", str(other), "--output_dir", str(tmp_path / "s2"), "--task", task],
                    "rows of task parity, not pick")
    other.write_text(json.dumps({**rows[0], "answer_options": ["a", "c"]}) + "\n")
    _one_line_error(capsys, ["select", "--pool", str(other), "--output_dir", str(tmp_path / "s3"), "--task", task],
                    "answer options a, c")
    (tmp_path / "free.yaml").write_text("name: pick_free\ndata: {test: rows.jsonl}\nprompt: '{q}'\ngold: label\n"
                                        "metric: judge_accuracy\n")
    other.write_text(json.dumps({**rows[0], "task": "pick_free"}) + "\n")
    _one_line_error(capsys, ["select", "--pool", str(other), "--output_dir", str(tmp_path / "s4"), "--task",
                             str(tmp_path / "free.yaml")], "LLM judge")
    _one_line_error(capsys, [*argv, "--task", str(tmp_path / "missing.yaml")], "missing.yaml")
