"""Boundary detection on scripted series, the callback inside a trainer-like loop, and query-selection categories."""

import json
from types import SimpleNamespace

import pytest

from rlce_trl.calibration.boundary import REWARD_KEY, BoundaryCallback, BoundaryDetector
from rlce_trl.calibration.queries import categorize, select_queries

# R_t rises by 5 per check from check 3 on; P_t rises by 5 per check until check 3, then stays flat.
REWARD = [10, 12, 14, 16, 21, 26, 31, 36, 41]
SCORE = [10, 15, 20, 25, 25, 25, 25, 25, 25]


def fired(detector, rewards, scores):
    return [k for k, (r, p) in enumerate(zip(rewards, scores, strict=True)) if detector.update(r, p)]


def test_fires_at_exactly_the_predicted_check():
    # check 7: last 4 deltas of P are 0,0,0,0 (plateau) and mean(dR - dP) = 5 > 0.5; check 6 still has one +5 in dP
    # (mean 1.25, not a plateau)
    assert fired(BoundaryDetector(window=4), REWARD, SCORE) == [7, 8]


def test_and_versus_or():
    flat = [10] * 9
    # reward and score both flat: a plateau without discrepancy
    assert fired(BoundaryDetector(window=4, mode="and"), flat, flat) == []
    assert fired(BoundaryDetector(window=4, mode="or"), flat, flat) == [4, 5, 6, 7, 8]
    # both rising together: no plateau, no discrepancy
    rising = [5 * k for k in range(9)]
    assert fired(BoundaryDetector(window=4, mode="or"), rising, rising) == []


def test_needs_window_plus_one_points_and_valid_mode():
    detector = BoundaryDetector(window=2)
    assert [detector.update(r, 0) for r in (0, 10)] == [False, False]
    assert detector.update(20, 0) is True
    with pytest.raises(ValueError, match="mode"):
        BoundaryDetector(mode="xor")


def test_callback_checks_every_n_steps_writes_the_series_and_can_stop(tmp_path):
    groups = tmp_path / "groups.jsonl"
    groups.write_text(json.dumps(group(["a", "b", "b", "b"], winner="a", judge="b")) + "\n")
    validation = SimpleNamespace(history=[])
    callback = BoundaryCallback(validation, check_every=2, window=4, stop_on_trigger=True, groups_file=str(groups))
    args = SimpleNamespace(output_dir=str(tmp_path))
    stopped_at = None
    for check, (reward, score) in enumerate(zip(REWARD, SCORE, strict=True)):
        for step in (2 * check + 1, 2 * check + 2):
            state = SimpleNamespace(global_step=step, is_world_process_zero=True)
            control = SimpleNamespace(should_training_stop=False)
            callback.on_log(args, state, control, logs={REWARD_KEY: reward / 100, "loss": 0.1})
            if step % 2 == 0:
                validation.history.append({"step": step, "score": score})
            callback.on_step_end(args, state, control)
            if control.should_training_stop and stopped_at is None:
                stopped_at = step
    assert stopped_at == 16  # check 7 happens at step 16
    event = json.loads((tmp_path / "calibration" / "boundary-step-16.json").read_text())
    assert [p[0] for p in event["series"]] == pytest.approx(REWARD[:8])
    queries = (tmp_path / "calibration" / "queries-step-16.jsonl").read_text().splitlines()
    # no tests logged
    assert json.loads(queries[0])["query_categories"] == ["uncertain", "inconsistent", "high_impact"]


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
