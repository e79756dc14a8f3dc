"""`rlce-trl calibrate ...` end to end on a tiny local model (the claim set, real requests, real files)."""

import json

import pytest

from rlce_trl.cli import main


@pytest.mark.slow  # three model loads through the CLI
def test_score_fit_and_score_calibrated(tiny_model_dir, tmp_path, capsys):
    model = ["--verifier_model_name_or_path", tiny_model_dir]
    assert main(["calibrate", "score", *model, "--resamples", "20", "--output_file", str(tmp_path / "s.json")]) == 0
    figures = json.loads((tmp_path / "s.json").read_text())
    assert figures["n"] == 50 and figures["true_yes_rate"] == 0.4 and sum(figures["verdicts"].values()) == 50
    assert "kappa" in capsys.readouterr().out
    assert main(["calibrate", "fit", *model, "--output_file", str(tmp_path / "c.json")]) == 0
    assert json.loads((tmp_path / "c.json").read_text())["fitted_on"] == 50
    assert main(["calibrate", "score", *model, "--calibration", str(tmp_path / "c.json"), "--resamples", "20"]) == 0
    assert "default+calibrated" in capsys.readouterr().out


def test_bad_inputs_are_one_line_errors(tiny_model_dir, tmp_path, capsys):
    (tmp_path / "p.json").write_text('{"validation": "no slot"}')
    assert main(["calibrate", "score", "--verifier_model_name_or_path", tiny_model_dir,
                 "--prompts", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: Invalid verifier prompts") and "\n" not in err
    assert main(["calibrate", "export", "--groups", str(tmp_path / "none.jsonl"), "--output_file",
                 str(tmp_path / "q")]) == 2


def test_export(tmp_path, capsys):
    record = {"rollouts": ["a", "b", "b", "b"], "methods": {"rlce": {
        "answers": ["a", "b"], "assignment": [0, 1, 1, 1], "status": "verified", "verified_answer": "a",
        "tests": [{"favoured": 0, "against": 1, "verdict": "yes"}]}}}
    (tmp_path / "g.jsonl").write_text(json.dumps(record) + "\n" + json.dumps({"bad": 1}) + "\n")
    args = ["calibrate", "export", "--groups", str(tmp_path / "g.jsonl"), "--output_file", str(tmp_path / "q.jsonl")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "1 queries" in out and "skipped 1 malformed" in out
    assert json.loads((tmp_path / "q.jsonl").read_text())["query_categories"] == ["inconsistent", "high_impact"]
