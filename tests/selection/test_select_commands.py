"""`rlce-trl sample` and `rlce-trl select` end to end with the tiny model: resume, settings guard, bad flags."""

import json

import pytest

from rlce_trl.cli import main


@pytest.mark.slow
def test_sample_then_select_resumes_and_guards(tiny_model_dir, tmp_path, capsys):
    pool = tmp_path / "pool"
    argv = ["sample", "--model_name_or_path", tiny_model_dir, "--synthetic", "3", "--output_dir", str(pool),
            "--n", "2", "--max_new_tokens", "4", "--dtype", "float32"]
    assert main(argv) == 0
    lines = (pool / "pool.jsonl").read_text().splitlines()
    assert len(lines) == 3
    row = json.loads(lines[0])
    assert len(row["candidates"]) == 2 and row["greedy"]["temperature"] == 0.0 and row["gold"]
    assert all(len(c["token_logprobs"]) == len(c["text"].split()) for c in row["candidates"])  # word-level vocab
    capsys.readouterr()
    assert main(argv) == 0  # resumed: nothing sampled again
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["sampled"] == 0
    assert main([*argv[:-6], "--n", "3", "--max_new_tokens", "4", "--dtype", "float32"]) == 2
    assert "other settings (n)" in capsys.readouterr().err

    out = tmp_path / "select"
    assert main(["select", "--pool", str(pool), "--output_dir", str(out), "--budgets", "1,2", "--subsets", "2"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["selectors"]) == {"greedy", "single", "majority", "elect", "elect_noframes", "oracle"}
    assert summary["rows"] == 3 and summary["candidates"] == 6  # the tiny model's words name no option
    assert summary["unparsed_candidates"] == 6 and summary["pool_stats"]["answer_rate"] == 0.0
    assert (out / "summary.md").read_text().startswith("| selector |")
    assert main(["select", "--pool", str(pool), "--output_dir", str(out), "--selectors", "best"]) == 2
    assert main(["select", "--pool", str(pool), "--output_dir", str(out), "--selectors", "rlce"]) == 2
    assert "--verifier_model_name_or_path" in capsys.readouterr().err
    assert main(["select", "--pool", str(tmp_path / "nowhere"), "--output_dir", str(out)]) == 2
