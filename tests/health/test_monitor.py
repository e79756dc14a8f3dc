"""The monitor over steps: reference, windows, alarms once per rule, files, `health_stop`, report and card."""

import json
import math
from collections import Counter, defaultdict

import pytest
from transformers import TrainerControl, TrainerState

from rlce_trl.audit import EvidenceLog
from rlce_trl.health import (
    HEALTH_FILE,
    GroupSummary,
    HealthMonitor,
    HealthThresholds,
    StepRecord,
    card_section,
    read_alarms,
)

T = HealthThresholds()


def healthy(step):
    """Two answers per group, one rewarded: no collapse."""
    return StepRecord(step, [GroupSummary(["a", "a", "b", "c"], [1.0, 1.0, 0.0, 0.0], "a") for _ in range(4)]
                      + [GroupSummary(["b", "d", "d", "b"], [1.0, 0.0, 0.0, 1.0], "b") for _ in range(4)])


def collapsed(step):
    """Every group unanimous on one label: within-group and cross-prompt collapse."""
    return StepRecord(step, [GroupSummary(["a"] * 4, [None] * 4, None) for _ in range(8)])


def test_rules_wait_for_warmup_and_window_then_alarm_once_per_rule():
    monitor = HealthMonitor("ttrl", warmup=2, window=2)
    logs = [monitor.add(healthy(1))[0], monitor.add(healthy(2))[0], monitor.add(collapsed(3))[0]]
    assert logs[0]["health/one_answer_share"] == 0.0 and logs[0]["health/alarms"] == 0.0
    assert "health/answer_entropy_ratio" in logs[1]  # the reference exists from the warmup's last step
    assert logs[2]["health/one_answer_share"] == 0.5 and logs[2]["health/alarms"] == 0.0  # no check yet: 3 < 2 + 2
    logged, checks = monitor.add(collapsed(4))
    assert logged["health/one_answer_share"] == 1.0
    fired = {c.rule for c in checks if c.fired}
    assert fired == {"within_group_collapse", "cross_prompt_collapse"}
    assert [a.rule for a in monitor.alarms] == ["within_group_collapse", "cross_prompt_collapse"]
    assert monitor.alarms[0].step == 4 and monitor.alarms[0].value == 1.0
    assert "at step 4: health/one_answer_share = 1.000" in monitor.alarms[0].message
    monitor.add(collapsed(5))
    assert len(monitor.alarms) == 2  # raised once; later firings only count in health/alarms
    assert "verified_majority_share" not in str(logged)  # entrenchment is RLCE's


def test_answer_loss_fires_when_the_rollouts_stop_answering():
    def silent(step):
        return StepRecord(step, [GroupSummary([None] * 4, [None] * 4, None) for _ in range(8)])

    monitor = HealthMonitor("ttrl", warmup=2, window=2)
    for step in (1, 2):
        monitor.add(healthy(step))
    monitor.add(silent(3))
    logged, checks = monitor.add(silent(4))
    assert logged["health/answered_share"] == 0.0
    assert [c.rule for c in checks if c.fired] == ["answer_loss"]  # the rules that read answers have no input
    assert "health/answered_share = 0.000 (threshold 0.500, reference 1.000)" in monitor.alarms[0].message


def test_entrenchment_is_checked_for_rlce():
    def step(n, verified, groups=30):
        return StepRecord(n, [GroupSummary(["a", "a", "b", "c"], [1.0 if verified == "a" else 0.0] * 4, verified)
                              for _ in range(groups)])

    monitor = HealthMonitor("rlce", warmup=1, window=1)
    monitor.add(step(1, "b"))  # reference: the verified answer never the majority (30 groups)
    logged, checks = monitor.add(step(2, "a"))
    assert logged["health/verified_majority_share"] == 1.0
    [check] = [c for c in checks if c.fired]
    # 30 groups < min_groups = 40: the threshold is raised by sqrt(40 / 30); 30 agreeing groups still pass it
    assert check.rule == "entrenchment"
    assert check.threshold == pytest.approx(T.entrenchment_cusum * math.sqrt(40 / 30))
    per_group = math.log((1 - 0.5 * T.entrenchment_alt) / (1 - 0.5 * T.entrenchment_null))  # d clipped to 0.5
    assert check.value == pytest.approx(30 * per_group)
    thin = HealthMonitor("rlce", warmup=1, window=1)  # the same from a 5-group reference: not yet
    thin.add(step(1, "b", groups=5))
    assert not [c for c in thin.add(step(2, "a"))[1] if c.fired]


def test_callback_logs_metrics_writes_alarms_and_stops(tmp_path):
    metrics = defaultdict(list)
    trail = EvidenceLog(tmp_path / "rlce_evidence.jsonl")
    (tmp_path / HEALTH_FILE).write_text(json.dumps({"type": "health_alarm", "step": 9, "rule": "old"}) + "\n")
    monitor = HealthMonitor("ttrl", warmup=1, window=1, stop=True, output_dir=str(tmp_path), metrics=metrics,
                            evidence_log=trail)
    state, control = TrainerState(), TrainerControl()
    monitor.on_train_begin(None, state, control)
    for step, record in enumerate([healthy(1), collapsed(2)], 1):
        monitor.pending.append(record)
        state.global_step = step
        control = monitor.on_step_end(None, state, control)
        if step == 1:
            assert not control.should_training_stop
    assert control.should_training_stop and control.should_save
    assert metrics["health/one_answer_share"] == [0.0, 1.0]
    alarms = read_alarms(str(tmp_path / HEALTH_FILE))
    assert [a["rule"] for a in alarms] == ["within_group_collapse", "cross_prompt_collapse"]  # the old run's gone
    assert alarms[0]["stopped"] and not alarms[1]["stopped"]
    trail_lines = [json.loads(line) for line in (tmp_path / "rlce_evidence.jsonl").read_text().splitlines()]
    assert [r["type"] for r in trail_lines] == ["health_alarm", "health_alarm"]
    card = card_section(monitor, 2)
    assert "stopped early at step 2" in card and "within group collapse" in card
    assert "no alarm" in card_section(HealthMonitor(), 5) and "was off" in card_section(None, 5)


def test_a_resumed_monitor_truncates_its_alarms_atomically(tmp_path, monkeypatch):
    """Resumed at step 2, the monitor drops the alarms of later steps by writing a new file and renaming it over the
    old one: killed before the rename, the old file is whole; after it, the file is a new one (another inode)."""
    from rlce_trl.data import jsonl

    path = tmp_path / HEALTH_FILE
    path.write_text("".join(json.dumps({"type": "health_alarm", "step": s, "rule": f"r{s}"}) + "\n"
                            for s in (1, 2, 3, 4)))
    before, inode = path.read_bytes(), path.stat().st_ino

    def resume():
        monitor = HealthMonitor("ttrl", output_dir=str(tmp_path))
        state = TrainerState()
        state.global_step = 2
        monitor.on_train_begin(None, state, TrainerControl())
        monitor.on_step_end(None, state, TrainerControl())

    def killed(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(jsonl.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        resume()
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == [HEALTH_FILE]
    monkeypatch.undo()
    resume()
    assert [a["step"] for a in read_alarms(str(path))] == [1, 2] and path.stat().st_ino != inode


def test_report_shows_the_health_panel(tmp_path):
    from rlce_trl.report import build_report

    history = [{"step": s, "health/one_answer_share": v, "loss": 0.0} for s, v in [(1, 0.1), (2, 0.9)]]
    (tmp_path / "trainer_state.json").write_text(json.dumps({"global_step": 2, "log_history": history}))
    alarm = {"type": "health_alarm", "step": 2, "rule": "within_group_collapse", "metric": "health/one_answer_share",
             "value": 0.9, "threshold": 0.8, "stopped": True}
    (tmp_path / "rlce_evidence.jsonl").write_text(json.dumps(alarm) + "\n")  # only in the trail here
    page, data = build_report(str(tmp_path))
    html = open(page, encoding="utf-8").read()
    assert 'id="health"' in html and "within group collapse" in html and "stopped the run" in html
    assert data.skipped_lines == 0  # an alarm line is not an unreadable group


def test_monitor_refuses_a_zero_window():
    with pytest.raises(ValueError, match="health_window"):
        HealthMonitor(window=0)


def test_free_text_runs_use_the_near_duplicate_rule():
    def step(n, same):
        groups = []
        for p in range(6):
            answers = ["i cannot tell what they want"] * 4 if same else [f"p{p}a{k} is the reply" for k in range(4)]
            groups.append(GroupSummary(answers, [1.0, 0.0, 0.0, 0.0], answers[0], closed=False))
        return StepRecord(n, groups)

    monitor = HealthMonitor("rlce", warmup=1, window=1)
    first, _ = monitor.add(step(1, same=False))
    assert first["health/near_duplicate_rate"] == 0.0 and "health/answer_entropy" not in first
    logged, checks = monitor.add(step(2, same=True))
    assert logged["health/near_duplicate_rate"] == 1.0
    assert {c.rule: c.metric for c in checks if c.fired}["cross_prompt_collapse"] == "health/near_duplicate_rate"


def test_step_verdicts_from_the_scorer_drive_the_drift_rule():
    """Baselines' judgments reach the monitor as the step's verdict counts (their results carry no tests)."""
    def step(n, yes):
        record = healthy(n)
        record.verdicts = Counter(score_2=yes, score_0=40 - yes)
        return record

    monitor = HealthMonitor("policy_judge", warmup=1, window=1)
    monitor.add(step(1, yes=10))
    logged, checks = monitor.add(step(2, yes=30))
    assert logged["health/verdict_drift"] == pytest.approx(0.5)  # 10/40 -> 30/40
    assert "verifier_drift" in {c.rule for c in checks if c.fired}
