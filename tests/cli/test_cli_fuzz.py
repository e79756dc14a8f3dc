"""Fuzz of the command line over malformed files, flags and rows (issue 13): whatever the input, `rlce-trl` ends with
exit 0, or with a non-zero exit and one `error:` line that names the fix. No exception may escape `main` (it would
reach the user as a traceback). In process, seeded; one subprocess run checks the real entry point. No model loads:
every case fails (or succeeds) before that."""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys

import pytest
from testing_utils import mutate

from rlce_trl.cli import main
from rlce_trl.data.hba import URFUNNY_LABELS

GOOD_ROW = {"id": "r0", "task": "urfunny", "prompt": [{"role": "user", "content": "clip 0: funny?"}],
            "answer_options": list(URFUNNY_LABELS), "gold": "humour"}
GOOD_RECORD = {"prompt_id": "p0", "gold": "a", "labels": ["a", "b"], "rollouts": ["a", "b"], "correct": [True, False],
               "methods": {"rlce": {"rewards": [1.0, 0.0], "answers": ["a", "b"], "answer_correct": [True, False],
                                    "tests": [{"favoured": 0, "against": 1, "verdict": "yes"}], "calls": 2},
                           "usc": {"rewards": [0.0, 1.0], "calls": 1}}}


def run(capsys, argv: list[str]) -> tuple[int, str]:
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exit_:  # argparse: usage line + one error line, exit 2
        code = exit_.code if isinstance(exit_.code, int) else 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code not in (0, None):
        last = [line for line in err.strip().splitlines() if line.strip()][-1]
        assert "error:" in last, err
        assert err.count("error:") == 1
    return code or 0, err


def write_lines(path, rows, rng: random.Random | None = None):
    text = "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n"
    if rng is not None and rng.random() < 0.2:
        text = text[: rng.randrange(1, len(text))]  # cut anywhere
    path.write_text(text, encoding="utf-8", errors="surrogatepass")


def evaluate_args(tmp_path, data, *extra):
    return ["evaluate", "--model_name_or_path", tmp_path / "no-such-model", "--data", data,
            "--output_dir", tmp_path / "out", "--no_progress", *extra]


BAD_FILES = {
    "missing": None,
    "empty": b"",
    "blank lines": b"\n\n  \n",
    "binary": bytes(range(256)),
    "latin-1": '{"id": "caf\xe9"}\n'.encode("latin-1"),
    "json list": b"[1, 2, 3]\n",
    "not json": b"{id: 1}\n{}\n",
    "a string per line": b'"row"\n',
    "huge line": b'{"x": "' + b"a" * 200_000 + b'"}\n',
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_malformed_files(tmp_path, capsys, name):
    path = tmp_path / "data.jsonl"
    if BAD_FILES[name] is not None:
        path.write_bytes(BAD_FILES[name])
    code, err = run(capsys, evaluate_args(tmp_path, path))
    assert code == 2 and err.startswith("error:")
    code, err = run(capsys, ["analyze", path, "--output_dir", tmp_path / "bench", "--no_plots"])
    assert code == 2 and err.startswith("error:")


@pytest.mark.parametrize(
    "argv",
    [
        ["--batch_size", "0"], ["--batch_size", "-3"], ["--batch_size", "two"], ["--limit", "-5"], ["--limit", "0"],
        ["--dtype", "float7"], ["--backend", "tpu"], ["--max_new_tokens", "0"], ["--vllm_kwargs", "{bad"],
        ["--vllm_kwargs", "[1]"], ["--judge_base_url", "http://127.0.0.1:9/v1"],
        ["--judge_base_url", "ftp://x", "--judge_model", "m"], ["--judge_deadline", "-1"], ["--unknown_flag"],
        ["--judge_concurrency", "0"], ["--hba_task", "chess"],
    ],
)
def test_bad_evaluate_flags(tmp_path, capsys, argv):
    data = tmp_path / "data.jsonl"
    write_lines(data, [GOOD_ROW])
    code, _ = run(capsys, evaluate_args(tmp_path, data, *argv))
    assert code == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["--synthetic", "-3"], ["--synthetic", "0"], ["--error_rates", "1.5"], ["--error_rates", "-0.1"],
        ["--max_tests", "0"], ["--permutations", "-1"], ["--trials", "0", "--simulate"], ["--ties", "maybe"],
        ["--abstain_rate", "1"], ["--concentration", "0"], ["--num_answers", "1", "--simulate"], [],
        ["--methods", "nonexistent"],
    ],
)
def test_bad_analyze_flags(tmp_path, capsys, argv):
    log = tmp_path / "log.jsonl"
    write_lines(log, [GOOD_RECORD])
    code, _ = run(capsys, ["analyze", *([log] if "--synthetic" not in argv and argv else []), "--output_dir",
                           tmp_path / "bench", "--no_plots", *argv])
    assert code == 2


def test_analyze_out_is_a_file_and_good_log_works(tmp_path, capsys):
    log = tmp_path / "log.jsonl"
    write_lines(log, [GOOD_RECORD, GOOD_RECORD])
    (tmp_path / "file").write_text("x")
    assert run(capsys, ["analyze", log, "--output_dir", tmp_path / "file", "--no_plots"])[0] == 2
    assert run(capsys, ["analyze", log, "--output_dir", tmp_path / "bench", "--no_plots"])[0] == 0


def test_fuzzed_evaluate_rows(tmp_path, capsys):
    rng = random.Random(13)
    for case in range(60):
        rows = [dict(GOOD_ROW, id=f"r{k}") for k in range(3)]
        rows[rng.randrange(3)] = mutate(rng, rows[0])
        data = tmp_path / f"rows{case}.jsonl"
        write_lines(data, rows, rng)
        code, err = run(capsys, evaluate_args(tmp_path, data))
        # well-formed rows get as far as the model, which does not exist: an error line either way
        assert code == 2 and err.strip().splitlines()[-1].startswith("error:"), (case, rows, err)


def test_fuzzed_analyze_logs(tmp_path, capsys):
    rng = random.Random(12)
    outcomes = set()
    for case in range(60):
        records = [copy.deepcopy(GOOD_RECORD) for _ in range(2)]
        records[rng.randrange(2)] = mutate(rng, GOOD_RECORD)
        log = tmp_path / f"log{case}.jsonl"
        write_lines(log, records, rng)
        code, _ = run(capsys, ["analyze", log, "--output_dir", tmp_path / "bench", "--no_plots"])
        outcomes.add(code)
    assert outcomes <= {0, 2} and 2 in outcomes


def test_the_installed_entry_point_prints_one_line(tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text('{"id": 1}\n{"id": 2, "prompt": "q"}\n')
    result = subprocess.run(
        [sys.executable, "-c", "import sys; from rlce_trl.cli import main; sys.exit(main())", *evaluate_args(
            tmp_path, data)], capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0 and result.stderr.startswith("error: ")
    assert "row 0: no `gold` field; no `prompt` field" in result.stderr  # `id` / `task` are optional


@pytest.mark.parametrize(
    "record, words",
    [
        ({"methods": GOOD_RECORD["methods"]}, "record 1: `correct` is missing"),
        ({"correct": [True, False]}, "`methods` is missing or empty"),
        ({**GOOD_RECORD, "methods": {"rlce": {"rewards": [1.0]}}}, "as long as `correct`"),
        ({**GOOD_RECORD, "methods": {"rlce": {"rewards": [1.0, 0.0], "answer_correct": [True, False],
                                              "tests": [{"favoured": 5, "verdict": "yes"}]}}}, "has a test"),
    ],
)
def test_analyze_names_the_record_without_fields(tmp_path, capsys, record, words):
    log = tmp_path / "log.jsonl"
    write_lines(log, [record])
    code, err = run(capsys, ["analyze", log, "--output_dir", tmp_path / "bench", "--no_plots"])
    assert code == 2 and words in err and "Fix:" in err and not (tmp_path / "bench").exists()
