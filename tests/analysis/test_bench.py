"""The bench: logged-groups records from real scorers, the summary table, the CLI, plots."""

import json

import pytest
from fakes import evidence_verifier

from rlce_trl.analysis.groups_log import log_groups
from rlce_trl.analysis.simulation import SyntheticVerifier, synthetic_groups
from rlce_trl.analysis.tables import markdown_table, summarize
from rlce_trl.cli import main as cli_main
from rlce_trl.data.jsonl import read_jsonl, write_jsonl
from rlce_trl.evidence.pipeline import EvidenceSettings
from rlce_trl.scoring import Group

LABELS = ("positive", "negative")


def boxed(*answers):
    return [f"Because... \\boxed{{{a}}}" if a is not None else "unsure" for a in answers]


def analyze(argv: list[str]) -> int:
    return cli_main(["analyze", *argv])


def test_log_groups_records_rewards_tests_and_cost():
    groups = [Group("User: clip one", boxed("positive", "negative", "negative", None), labels=LABELS, key="g1")]
    verifier = evidence_verifier({"positive>negative": "yes", "negative>positive": "no"})
    (record,) = log_groups(groups, ["Positive"], verifier, methods=("rlce", "usc", "ttrl"),
                           settings=EvidenceSettings(redact_answers=False))
    assert record["prompt_id"] == "g1" and record["rollouts"] == ["positive", "negative", "negative", None]
    assert record["correct"] == [True, False, False, False]
    rlce, usc = record["methods"]["rlce"], record["methods"]["usc"]
    assert rlce["rewards"] == [1.0, 0.0, 0.0, 0.0] and rlce["answer_correct"] == [True, False]
    assert rlce["tests"] == [{"favoured": 0, "against": 1, "verdict": "yes", "tie_break": False},
                             {"favoured": 1, "against": 0, "verdict": "no", "tie_break": False}]
    # RLCE: one construction call (2 requests, n=1 each) and one validation call (2 requests); one token per text
    assert (rlce["calls"], rlce["requests"], rlce["tokens"]) == (2, 4, 4) and rlce["prompt_chars"] > 0
    assert usc["rewards"] == [0.0, 1.0, 1.0, 0.0] and usc["calls"] == 0 and "tests" not in usc
    json.dumps(record)


def record(rewards_by_method, correct, tests=None):
    methods = {m: {"rewards": r, "calls": 1, "requests": 2, "tokens": 10} for m, r in rewards_by_method.items()}
    if tests:
        methods["rlce"].update(tests=tests, answer_correct=[True, False])
    return {"prompt_id": "p", "gold": "x", "labels": None, "rollouts": [], "correct": correct, "methods": methods}


def test_summary_on_hand_computed_groups():
    records = [
        # USC prefers the wrong majority; RLCE reverses it; the judge agrees with USC
        record({"rlce": [1.0, 0.0, 0.0], "usc": [0.0, 1.0, 1.0], "policy_judge": [0.0, 1.0, 1.0]},
               [True, False, False], tests=[{"favoured": 0, "against": 1, "verdict": "yes"}]),
        # everyone right; RLCE gives no reward
        record({"rlce": [None, None, None], "usc": [1.0, 0.0, 0.0], "policy_judge": [1.0, 0.0, 0.0]},
               [True, False, False], tests=[{"favoured": 0, "against": 1, "verdict": "unknown"}]),
    ]
    summary = summarize(records, permutations=3)
    rows = {r["method"]: r for r in summary["rows"]}
    assert rows["rlce"]["variation_share"] == 1.0 and rows["rlce"]["varied_groups"] == 1
    assert rows["rlce"]["no_reward_frac"] == 0.5
    assert rows["rlce"]["reverses_usc"] == 1.0 and rows["rlce"]["reverses_usc_cases"] == 2
    assert rows["policy_judge"]["reverses_usc"] == 0.0 and rows["usc"]["reverses_usc"] is None
    assert rows["rlce"]["verdict_accuracy"] == 1.0 and rows["rlce"]["verdict_groups"] == 1
    assert rows["usc"]["requests_per_group"] == 2 and rows["usc"]["verdict_accuracy"] is None
    assert list(summary["by_num_tests"]) == ["rlce"] and summary["by_num_tests"]["rlce"][0].accuracy == 1.0
    table = markdown_table(summary["rows"])
    assert "| rlce | 2 | 50.0% | 1 | 100.0%" in table


def test_synthetic_log_through_every_scorer_and_cli(tmp_path):
    made = synthetic_groups(6, seed=3)
    verifier = SyntheticVerifier({pid: gold for pid, gold, _ in made}, error_rate=0.2, seed=3)
    records = log_groups([g for _, _, g in made], [gold for _, gold, _ in made], verifier,
                         methods=("rlce", "rlce_pointwise", "usc", "policy_judge", "ttrl", "rar", "rler"))
    path = tmp_path / "log.jsonl"
    write_jsonl(records, path)
    assert read_jsonl(path) == json.loads(json.dumps(records))
    assert analyze([str(path), "--output_dir", str(tmp_path / "out"), "--no_plots", "--permutations", "2"]) == 0
    text = (tmp_path / "out" / "summary.md").read_text()
    for method in ("rlce_pointwise", "policy_judge", "rler"):
        assert f"| {method} |" in text
    assert (tmp_path / "out" / "composition.csv").read_text().startswith("method,tests,accuracy,groups")


def test_cli_simulation_writes_table(tmp_path):
    assert analyze(["--simulate", "--output_dir", str(tmp_path), "--trials", "50", "--error_rates", "0.3",
                    "--no_plots"]) == 0
    text = (tmp_path / "simulation.md").read_text()
    assert "| 30% |" in text
    # the paper's measured points (Fig. 3) come from the tasks' definitions, in Table 1's column order
    paper_rows = [line for line in text.splitlines() if line.startswith("| paper ")]
    assert [row.split(" |")[0] for row in paper_rows] == ["| paper MOSEI", "| paper UR-FUNNY"] * 2
    assert "| 54% |" in paper_rows[0] and paper_rows[0].endswith("| 69% |")
    assert "| 100% | 86% |" in paper_rows[3]


def test_plots_are_written(tmp_path):
    pytest.importorskip("matplotlib")
    made = synthetic_groups(8, seed=1)
    verifier = SyntheticVerifier({pid: gold for pid, gold, _ in made}, seed=1)
    records = log_groups([g for _, _, g in made], [gold for _, gold, _ in made], verifier,
                         methods=("rlce", "usc", "policy_judge", "rar"),
                         settings=EvidenceSettings(tests_per_direction=3))
    write_jsonl(records, tmp_path / "log.jsonl")
    assert analyze([str(tmp_path / "log.jsonl"), "--output_dir", str(tmp_path), "--permutations", "2"]) == 0
    for name in ("variation.png", "reversals.png", "composition.png", "cost.png"):
        assert (tmp_path / name).stat().st_size > 5000
    assert analyze(["--simulate", "--output_dir", str(tmp_path), "--trials", "30", "--error_rates", "0.3"]) == 0
    assert (tmp_path / "simulation.png").stat().st_size > 5000
