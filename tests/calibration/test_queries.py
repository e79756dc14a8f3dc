"""Query selection for calibration: the categories of a logged group, the ranking, and the evidence trail as input."""

import json

import pytest

from rlce_trl.calibration.queries import categorize, select_queries


def group(rollouts, winner, judge=None, tests=None, status="verified"):
    answers = sorted(set(rollouts))
    methods = {"rlce": {"answers": answers, "assignment": [answers.index(r) for r in rollouts], "status": status,
                        "verified_answer": winner, "tests": tests or []}}
    if judge is not None:
        methods["policy_judge"] = {"verified_answer": judge}
    return {"prompt_id": "p", "rollouts": rollouts, "methods": methods}


def test_query_categories():
    clear = [{"favoured": 0, "against": 1, "verdict": "yes"}, {"favoured": 1, "against": 0, "verdict": "no"}]
    assert categorize(group(["a", "a", "a", "b"], "a", "a", clear)) == []
    assert categorize(group(["a", "a", "b", "b"], None, status="tie")) == ["uncertain"]
    close = [{"favoured": 0, "against": 1, "verdict": "yes"}, {"favoured": 1, "against": 0, "verdict": "yes"}]
    assert categorize(group(["a", "a", "a", "b"], "a", "a", close)) == ["uncertain"]
    unknowns = [{"favoured": 0, "against": 1, "verdict": "unknown"}, {"favoured": 1, "against": 0, "verdict": None}]
    assert "uncertain" in categorize(group(["a", "a", "a", "b"], "a", "a", unknowns))
    # winner differs from the majority but agrees with the judge: not inconsistent, still high impact
    assert categorize(group(["a", "b", "b", "b"], "a", "a", clear)) == ["high_impact"]
    assert categorize(group(["a", "b", "b", "b"], "a", "b", clear)) == ["inconsistent", "high_impact"]


def test_select_queries_ranks_by_categories_keeps_k_and_skips_malformed():
    clear = [{"favoured": 0, "against": 1, "verdict": "yes"}]
    records = [
        group(["a", "a", "b", "b"], None, status="tie"),  # 1 category
        group(["a", "b", "b", "b"], "a", "b", clear),  # 2 categories
        group(["a", "a", "a", "b"], "a", "a", clear),  # none
        {"prompt_id": "broken"},
        {"methods": {"rlce": None}},
    ]
    picked, skipped = select_queries(records, k=5)
    assert skipped == 2 and [r["query_categories"] for r in picked] == [["inconsistent", "high_impact"], ["uncertain"]]
    assert len(select_queries(records, k=1)[0]) == 1
    with pytest.raises(ValueError, match="k must"):
        select_queries(records, k=0)


def test_a_training_runs_evidence_trail_is_read_as_groups(tmp_path):
    """`calibrate export --groups <output_dir>/rlce_evidence.jsonl`: the trail's own records, written by the audit."""
    from rlce_trl.audit import group_record
    from rlce_trl.evidence.state import EvidenceTest
    from rlce_trl.scoring import Group, GroupResult

    g = Group(context="User: q", completions=["x", "y", "y", "y"], labels=None)
    tie = GroupResult(verified=[None] * 4, status="tie", answers=["x", "y"], scores=[0.5, 0.5],
                      verified_answer=None, assignment=[0, 1, 1, 1],
                      tests=[EvidenceTest(favoured=0, against=1, text="t", verdict="yes")])
    minority = GroupResult(verified=[1.0, 0.0, 0.0, 0.0], status="verified", answers=["x", "y"], scores=[1.0, 0.0],
                           verified_answer="x", assignment=[0, 1, 1, 1],
                           tests=[EvidenceTest(favoured=0, against=1, text="t", verdict="yes")])
    records = [group_record(g, r, group_id=f"train-1-{i}", step=1) for i, r in enumerate([tie, minority])]
    picked, skipped = select_queries(json.loads(json.dumps(records)), k=5)
    assert skipped == 0 and [r["query_categories"] for r in picked] == [["inconsistent", "high_impact"], ["uncertain"]]
