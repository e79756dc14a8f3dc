"""trackio (`rlce_trl.tracking`): a REAL tiny GRPO run with `report_to="trackio"` writes each logged step's rollout
groups as traces (prompt, answers, one span per verifier call with its tests and verdicts, rewards as metadata) at
the step of its metrics, a forced health alarm as an alert, nothing private and no network call; the card carries a
Space's badge and tags; the config checks trackio is there. The browser test (slow) opens trackio's own local
dashboard in headless Chromium: the metrics plots and one group's evidence. trackio writes under the session's
`TRACKIO_DIR` (conftest.py)."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from pathlib import Path

import pytest

trackio = pytest.importorskip("trackio", reason="trackio is not installed (the test and trackio extras have it)")

from rlce_trl.tracking import (  # noqa: E402
    TRACE_KEYS,
    TrackioEvidence,
    add_trackio_badge,
    evidence_trace,
    sample_groups,
    with_trackio_tags,
)

ARTIFACTS = Path(os.environ.get("RLCE_TEST_ARTIFACTS", Path(__file__).resolve().parents[1] / "test-artifacts"))
SECRET = "s3cr3t-Value-9876"  # the value of a credential-named environment variable


def _record(**overrides) -> dict:
    record = {
        "schema": 1, "id": "3-1", "step": 3, "mode": "train", "method": "rlce", "status": "verified",
        "context": "User: which do they like?", "labels": None, "completions": ["\\boxed{tea}", "\\boxed{coffee}",
                                                                              "\\boxed{tea}", "no idea"],
        "answers": ["tea", "coffee"], "assignment": [0, 1, 0, None],
        "tests": [
            {"favoured": 0, "against": 1, "text": "They said they drink tea daily.", "verdict": "yes",
             "failure": None, "round": 0, "choice_logprobs": {"yes": -0.1, "no": -2.5}},
            {"favoured": 1, "against": 0, "text": "They asked for coffee.", "verdict": None,
             "failure": "unparsable", "round": 0, "choice_logprobs": None},
            {"favoured": 1, "against": 0, "text": "Coffee was mentioned first.", "verdict": "no", "failure": None,
             "round": 0, "choice_logprobs": None},
        ],
        "scores": [1.0, 0.0], "rewards": [1.0, 0.0, 1.0, 0.0], "winner": 0, "verified_answer": "tea",
        "tie_break_round": False, "extra": None,
    }
    return {**record, **overrides}


# -- the traces, from evidence-trail records ---------------------------------------------------------------------
def test_a_group_record_becomes_a_trace_with_one_span_per_verifier_call():
    trace = evidence_trace(_record())
    trackio.Trace(**trace)  # trackio accepts it as is
    messages = trace["messages"]
    assert messages[0] == {"role": "user", "content": "User: which do they like?"}
    assert messages[1]["content"] == "verified answer: tea (verified)"  # the dashboard's preview
    assert messages[2]["content"] == "answer 0 (rollouts [0, 2], score 1.000 · verified): tea"
    assert messages[3]["content"] == "answer 1 (rollouts [1], score 0.000): coffee"
    spans = {s["id"]: s for s in trace["spans"]}
    assert list(spans) == ["group", "equivalence", "construction-0", "validation-0", "construction-1",
                           "validation-1", "validation-2", "aggregation"]
    assert spans["equivalence"]["kind"] == "generation"  # free text: the verifier's equivalence call
    assert spans["equivalence"]["output"] == {"answers": ["tea", "coffee"], "assignment": [0, 1, 0, None]}
    # one construction request per direction, holding the tests it wrote; each test's validation under it
    assert spans["construction-0"]["name"] == "construction: tea over coffee"
    assert spans["construction-1"]["output"] == ["They asked for coffee.", "Coffee was mentioned first."]
    assert {k: spans["validation-2"][k] for k in ("parent_id", "input", "output", "name")} == {
        "parent_id": "construction-1", "input": "Coffee was mentioned first.", "output": "no",
        "name": "validation: no"}
    assert spans["validation-0"]["metadata"]["choice_logprobs"] == {"yes": -0.1, "no": -2.5}
    assert spans["validation-1"]["output"] == "abstained (unparsable)" and "error" not in spans["validation-1"]
    assert spans["validation-1"]["metadata"]["failure"] == "unparsable"
    assert spans["aggregation"]["output"] == {"scores": {"tea": 1.0, "coffee": 0.0}, "winner": 0,
                                              "rewards": [1.0, 0.0, 1.0, 0.0]}
    meta = trace["metadata"]
    assert meta["rewards"] == [1.0, 0.0, 1.0, 0.0] and meta["group"] == "3-1" and meta["step"] == 3
    assert meta["verified_answer"] == "tea" and meta["tests"] == 3 and "extra" not in meta


def test_closed_labels_a_baseline_and_a_bare_record():
    closed = evidence_trace(_record(labels=["tea", "coffee"], tests=[], winner=None, verified_answer=None,
                                    status="tie", extra={"rubrics": ["be kind"], "extra": {}}))
    spans = {s["id"]: s for s in closed["spans"]}
    assert spans["equivalence"]["kind"] == "span" and "no model call" in spans["equivalence"]["name"]
    assert list(spans) == ["group", "equivalence", "aggregation"]
    assert closed["messages"][1]["content"] == "no verified answer (tie); 2 distinct answers"
    assert closed["metadata"]["extra"] == {"rubrics": ["be kind"]}
    bare = evidence_trace({"id": "eval-0-0", "mode": "eval"})  # a record with hardly anything: no error
    trackio.Trace(**bare)
    assert bare["messages"][0] == {"role": "user", "content": ""}
    long = evidence_trace(_record(context="x" * 3000 + " the question?"))  # the request: the prompt's end
    assert long["messages"][0]["content"].endswith(" the question?") and len(long["messages"][0]["content"]) == 301
    assert long["spans"][0]["input"] == "x" * 3000 + " the question?"


def test_nothing_private_reaches_a_trace(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    record = _record(context=f"User: my key is {SECRET}, see http://bob:pw12345@host/v1",
                     extra={"api_key": "abcdef", "note": f"Bearer {SECRET}"})
    record["tests"][0]["text"] = f"They quoted {SECRET}."
    text = json.dumps(evidence_trace(record))
    assert SECRET not in text and "pw12345" not in text and "abcdef" not in text
    assert "<redacted>" in text and "http://host/v1" in text


def test_the_recorder_feeds_its_listeners_also_without_a_trail_file(tmp_path):
    from types import SimpleNamespace

    from rlce_trl.audit import EvidenceRecorder

    group = SimpleNamespace(context="c", labels=None, completions=["a", "b"])
    result = SimpleNamespace(answers=["a", "b"], verified_answer="a", tests=[], assignment=[0, 1], status="verified",
                             scores=[1.0, 0.0], verified=[1.0, 0.0])
    for enabled in (False, True):
        path = tmp_path / f"trail-{enabled}.jsonl"
        recorder, seen = EvidenceRecorder(path, "rlce", enabled=enabled), []
        if not enabled:  # without a file or a listener nothing is built
            assert recorder.record(group, result, "1-0", 1, "train") is None
        recorder.listeners.append(seen.extend)
        record = recorder.record(group, result, "1-0", 1, "train")
        assert recorder.write([record, None], 0) == (1 if enabled else 0)
        assert seen == [record] and record["rewards"] == [1.0, 0.0] and path.exists() is enabled
    assert EvidenceRecorder(tmp_path / "x.jsonl", "rlce", is_main=False).write([record], 0) == 0


def test_groups_are_sampled_up_to_the_cap_reproducibly():
    records = [_record(id=f"3-{i}") for i in range(10)]
    assert sample_groups(records[:3], 8, "0:train:3") == records[:3]
    chosen = sample_groups(records, 4, "0:train:3")
    assert len(chosen) == 4 and chosen == sample_groups(records, 4, "0:train:3")
    assert [r["id"] for r in chosen] == sorted((r["id"] for r in chosen), key=lambda i: int(i.split("-")[1]))
    assert sample_groups(records, 0, "x") == []


# -- the model card ----------------------------------------------------------------------------------------------
URL = "https://user-space.hf.space?project=p&runs=r&sidebar=collapsed"


def test_card_badge_and_tags_for_a_space():
    assert with_trackio_tags(["trl", "trackio:https://old"], URL) == ["trl", "trackio", f"trackio:{URL}"]
    assert with_trackio_tags(None, None) is None and with_trackio_tags(["x"], None) == ["x"]
    card = "# m\n\n## Training procedure\n\nThis model was trained with X.\n"
    linked = add_trackio_badge(card, URL)
    assert 'title="Visualize in Trackio" width="150" height="24"/>](' + URL + ")" in linked
    assert add_trackio_badge(linked, URL) == linked and add_trackio_badge(card, None) == card


class FakeRun:  # a fake of trackio's Run logging to a Space (a Space cannot be reached here)
    _space_id, project, name = "user/space", "p", "r"


def test_the_space_url_is_read_while_the_run_is_open():
    tracker = TrackioEvidence()
    token = trackio.context_vars.current_run.set(FakeRun())
    try:
        tracker._remember_space()
    finally:
        trackio.context_vars.current_run.reset(token)
    assert tracker.space_url == URL


def test_only_the_logged_steps_groups_are_kept_and_sent_at_its_metrics_step(caplog):
    from types import SimpleNamespace

    tracker = TrackioEvidence(max_groups=8)
    tracker.add([_record(id="1-0", step=1), _record(id="1-1", step=1)])  # a step that is not logged (logging_steps)
    tracker.add([_record(id="2-0", step=2), {"type": "health_alarm", "step": 2}])
    tracker.add([_record(id="eval-2-0", step=2, mode="eval"), _record(id="eval-2-1", step=2, mode="eval", answers=5)])
    assert {m: [r["id"] for r in rs] for m, rs in tracker.pending.items()} == {
        "train": ["2-0"], "eval": ["eval-2-0", "eval-2-1"]}
    project = f"rlce-logged-{os.getpid()}"
    trackio.init(project=project)
    try:
        trackio.log({"train/loss": 1.0})
        trackio.log({"train/loss": 0.5})  # transformers' callback logs the step's metrics first: trackio step 1
        tracker.on_log(None, SimpleNamespace(is_world_process_zero=True), None, logs={})
    finally:
        trackio.finish()
    rows = [(s, k, json.loads(m)["group"]) for s, k, m in _rows(project, "SELECT step, key, metadata FROM traces")]
    assert sorted(rows) == [(1, "eval/evidence", "eval-2-0"), (1, "train/evidence", "2-0")]
    assert tracker.pending == {} and tracker.traces_sent == 2
    assert "trackio: group eval-2-1 was not sent (TypeError" in caplog.text  # a malformed record: skipped, said


def test_the_alarm_that_stopped_the_run_is_an_error(monkeypatch):
    from types import SimpleNamespace

    from rlce_trl.health import Alarm

    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    first = Alarm("answer_loss", "health/answered_share", 0.1, 0.3, 4, reference=0.6)
    stop = Alarm("verifier_drift", "health/verdict_drift", 0.4, 0.25, 5)
    monitor = SimpleNamespace(alarms=[first], stopped_by=None)
    project = f"rlce-alerts-{os.getpid()}"
    tracker, state = TrackioEvidence(monitor=monitor), SimpleNamespace(is_world_process_zero=True)
    trackio.init(project=project)
    try:
        tracker.on_step_end(None, state, None)
        monitor.alarms.append(stop)
        monitor.stopped_by = stop
        tracker.on_step_end(None, state, None)
        tracker.on_step_end(None, state, None)  # nothing new: nothing sent twice
    finally:
        trackio.finish()
    alerts = _rows(project, "SELECT title, level, text FROM alerts ORDER BY timestamp")
    assert [(t, level) for t, level, _ in alerts] == [("training health: answer loss", "warn"),
                                                      ("training health: verifier drift", "error")]
    assert alerts[1][2] == stop.message + " -- the run stops here (health_stop)."


# -- the config ----------------------------------------------------------------------------------------------------
def test_config_checks_trackio_and_the_cap(tmp_path, monkeypatch):
    from rlce_trl import RLCEGRPOConfig
    from rlce_trl import config as config_module

    with pytest.raises(ValueError, match="rlce_trackio_groups=-1"):
        RLCEGRPOConfig(str(tmp_path), bf16=False, use_cpu=True, rlce_trackio_groups=-1)
    real = config_module.importlib.util.find_spec
    monkeypatch.setattr(config_module.importlib.util, "find_spec", lambda name, *a: None if name == "trackio"
                        else real(name, *a))
    with pytest.raises(ValueError, match=r"pip install 'rlce-trl\[trackio\]'"):
        RLCEGRPOConfig(str(tmp_path), bf16=False, use_cpu=True, report_to=["trackio"])
    RLCEGRPOConfig(str(tmp_path), bf16=False, use_cpu=True, report_to="none")  # without trackio: unchanged


def test_the_command_line_without_trackio_is_one_error_line(tmp_path, monkeypatch, capsys):
    from rlce_trl import config as config_module
    from rlce_trl.cli import main

    real = config_module.importlib.util.find_spec
    monkeypatch.setattr(config_module.importlib.util, "find_spec", lambda name, *a: None if name == "trackio"
                        else real(name, *a))
    code = main(["train", "--config", "quickstart", "--report_to", "trackio", "--output_dir", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error:")
    assert "pip install 'rlce-trl[trackio]'" in err[0] and not (tmp_path / "o").exists()


def _db(project: str) -> Path:
    return Path(trackio.utils.TRACKIO_DIR) / f"{project}.db"


def test_the_config_sent_by_transformers_callback_is_scrubbed(tmp_path, monkeypatch):
    from transformers import TrainerState
    from transformers.integrations import TrackioCallback

    from rlce_trl import RLCEGRPOConfig

    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    project = f"rlce-config-{os.getpid()}"
    args = RLCEGRPOConfig(str(tmp_path), bf16=False, use_cpu=True, report_to="trackio", project=project,
                          verifier_mode="server", run_name=f"run-{SECRET}",
                          verifier_server_base_url=f"http://user:hunter2pw@10.0.0.1:8000/v1?api_key={SECRET}")
    callback = TrackioCallback()
    callback.setup(args, TrainerState(), model=None)
    trackio.log({"x": 1.0})
    trackio.finish()
    stored = _db(project).read_bytes()
    assert b"10.0.0.1:8000" in stored  # the config reached trackio ...
    assert b"hunter2pw" not in stored and SECRET.encode() not in stored  # ... scrubbed


# -- a real run ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trackio_run(tiny_model_dir, tmp_path_factory):
    """3 steps of a tiny model with report_to trackio, 2 traces per step, an evaluation at the end, a health alarm
    forced at the first checked step, a secret in the prompts, and every socket connection and name lookup
    recorded."""
    from datasets import Dataset
    from testing_utils import preference_rows, tiny_grpo_args

    from rlce_trl import RLCEGRPOTrainer

    os.environ["MY_SERVICE_TOKEN"] = SECRET
    rows = preference_rows(16)
    for row in rows:
        row["prompt"][0]["content"] += f" {SECRET}"
    project = f"rlce-run-{os.getpid()}"
    args = tiny_grpo_args(tmp_path_factory.mktemp("run") / "out", report_to="trackio", project=project,
                          max_steps=3, log_completions=True, rlce_trackio_groups=2, health_warmup_steps=1,
                          health_window=1, health_thresholds={"collapse_share": 0.0, "collapse_margin": -1.0},
                          eval_strategy="steps", eval_steps=3, per_device_eval_batch_size=16)
    contacted = []
    connect, lookup = socket.socket.connect, socket.getaddrinfo
    socket.socket.connect = lambda self, address: contacted.append(address) or connect(self, address)
    socket.getaddrinfo = lambda host, *a, **k: contacted.append(host) or lookup(host, *a, **k)
    try:
        trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=Dataset.from_list(rows),
                                  eval_dataset=Dataset.from_list(rows[:4]))
        trainer.train()
    finally:
        socket.socket.connect, socket.getaddrinfo = connect, lookup
        os.environ.pop("MY_SERVICE_TOKEN", None)
    return trainer, project, contacted


def _trail(trainer) -> list[dict]:
    """The group records of the run's evidence trail (not its alarm lines)."""
    lines = map(json.loads, Path(trainer.args.output_dir, "rlce_evidence.jsonl").read_text().splitlines())
    return [r for r in lines if "id" in r]


def _rows(project: str, query: str) -> list:
    with sqlite3.connect(_db(project)) as db:
        return db.execute(query).fetchall()


def test_each_logged_step_sends_its_groups_as_traces(trackio_run):
    trainer, project, _ = trackio_run
    traces = _rows(project, "SELECT step, key, metadata, spans FROM traces ORDER BY id")
    metric_steps = [s for s, m in _rows(project, "SELECT step, metrics FROM metrics")
                    if "train/rlce/verified_fraction" in json.loads(m)]
    assert len(metric_steps) == 3 and trainer.tracking.traces_sent == 6 + 2
    trail = {r["id"]: r for r in _trail(trainer)}
    assert len(trail) == 12 + 4  # 4 groups a step and 4 in the evaluation: 2 of each sent
    evaluation = [(s, json.loads(m)) for s, k, m, _ in traces if k == TRACE_KEYS["eval"]]
    (eval_step,) = [s for s, m in _rows(project, "SELECT step, metrics FROM metrics") if "eval/loss" in json.loads(m)]
    assert len(evaluation) == 2 and all(s == eval_step for s, _ in evaluation)
    assert all(m["group"].startswith("eval-3-") and m["mode"] == "eval" for _, m in evaluation)
    by_step: dict[int, list[dict]] = {}
    for step, key, metadata, spans in traces:
        metadata, spans = json.loads(metadata), json.loads(spans)
        if key == TRACE_KEYS["eval"]:
            continue
        assert key == TRACE_KEYS["train"]
        record = trail[metadata["group"]]  # a real group of the trail, logged with its step's metrics
        assert step == metric_steps[record["step"] - 1]
        assert metadata["rewards"] == record["rewards"] and metadata["status"] == record["status"]
        tests = [s for s in spans if s["id"].startswith("validation-")]
        assert [(s["input"], s["output"]) for s in tests] == [(t["text"], t["verdict"]) for t in record["tests"]]
        by_step.setdefault(record["step"], []).append(metadata)
    assert sorted(by_step) == [1, 2, 3] and all(len(v) == 2 for v in by_step.values())
    assert any(json.loads(s) and any(x["id"].startswith("validation-") for x in json.loads(s))
               for *_, s in traces)  # some group of the run had tests


def test_a_health_alarm_becomes_an_alert(trackio_run):
    trainer, project, _ = trackio_run
    alarms = trainer.health.alarms
    assert alarms  # forced by the thresholds
    alerts = _rows(project, "SELECT title, text, level FROM alerts")
    assert [(a[0], a[1], a[2]) for a in alerts] == [
        (f"training health: {alarm.rule.replace('_', ' ')}", alarm.message, "warn") for alarm in alarms]


def test_nothing_private_and_no_network(trackio_run):
    trainer, project, contacted = trackio_run
    stored = _db(project).read_bytes()
    assert b"the user said the food" in stored  # prompts reached trackio (traces, TRL's completions table) ...
    assert SECRET.encode() not in stored and b"<redacted>" in stored  # ... scrubbed
    remote = [a for a in contacted if (a[0] if isinstance(a, tuple) else a) not in ("127.0.0.1", "localhost", "::1")]
    assert remote == []
    assert trainer.tracking.space_url is None  # a local project: no Space, no badge
    trainer.create_model_card()
    assert "Visualize in Trackio" not in Path(trainer.args.output_dir, "README.md").read_text()


def test_the_card_of_a_run_that_logged_to_a_space(trackio_run):
    trainer, _, _ = trackio_run
    trainer.tracking.space_url = URL  # as read from a run logging to a Space (see the FakeRun test)
    try:
        trainer.create_model_card()
    finally:
        trainer.tracking.space_url = None
    card = Path(trainer.args.output_dir, "README.md").read_text()
    assert f"]({URL})" in card and "Visualize in Trackio" in card
    front = card.split("---")[1]
    assert "- trackio\n" in front and f"- trackio:{URL}" in front


def test_without_trackio_nothing_changes(tiny_model_dir, tmp_path):
    from datasets import Dataset
    from testing_utils import preference_rows, tiny_grpo_args

    from rlce_trl import RLCEGRPOTrainer

    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=tiny_grpo_args(tmp_path / "out", max_steps=1),
                              train_dataset=Dataset.from_list(preference_rows(16)))
    assert trainer.tracking is None and trainer.evidence.listeners == []
    assert not any(isinstance(c, TrackioEvidence) for c in trainer.callback_handler.callbacks)


# -- trackio's own dashboard in a real browser -------------------------------------------------------------------
#: Per plot of the Metrics page: its title and how many strongly coloured pixels its canvas holds (axes and text
#: are grey; the run's line is coloured). Each plot is scrolled into view first: trackio draws only those near it.
DRAWN_PLOTS = ("[...document.querySelectorAll('.plot-container')].map(c => { c.scrollIntoView(); "
               "const canvas = c.querySelector('.plot canvas'); let n = 0; if (canvas) { "
               "const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data; "
               "for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 200 && Math.max(d[i], d[i + 1], d[i + 2]) - "
               "Math.min(d[i], d[i + 1], d[i + 2]) > 40) n++; } "
               "return [c.querySelector('.plot-title')?.textContent.trim(), n]; })")


@pytest.mark.slow
def test_the_dashboard_shows_the_metrics_and_a_groups_evidence(trackio_run):
    from browser import Browser, find_chromium
    from testing_utils import free_port

    executable = find_chromium()
    if executable is None:
        pytest.skip("chromium is not installed: `apt-get install -y chromium` (Debian) runs the browser test")
    trainer, project, _ = trackio_run
    app, url, _, _ = trackio.show(project=project, open_browser=False, block_thread=False, server_port=free_port())
    b = Browser(executable)
    base = url.rstrip("/")

    def wait(expression: str, timeout: float = 30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = b.evaluate(expression)
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"the dashboard never showed: {expression}")

    try:
        # the metrics: the rlce/* and health/* plots, each with its line drawn (coloured pixels on its canvas)
        b.open(f"{base}/?project={project}&metric_filter=^train/(rlce/distinct_answers_mean|rlce/verdict_yes_frac|"
               "health/answered_share)$")
        drawn = wait(f"(() => {{ const p = {DRAWN_PLOTS}; return p.length === 3 && p.every(x => x[1] > 20) && p; "
                     "})()")
        assert sorted(title for title, _ in drawn) == ["answered_share", "distinct_answers_mean", "verdict_yes_frac"]
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        b.screenshot(str(ARTIFACTS / "trackio-metrics.png"))

        # the traces: a group with tests opens on its prompt, answers, verifier calls and verdicts
        b.open(f"{base}/traces?project={project}")
        assert wait("document.querySelectorAll('tr.trace-row').length") == 8
        opened = None
        for i in range(8):
            b.evaluate(f"document.querySelectorAll('tr.trace-row')[{i}].click(), 1")
            detail = wait("document.querySelector('.trace-detail')?.innerText")
            if "validation:" in detail:
                opened = detail
                break
        assert opened is not None, "no trace with validation spans"
        group = next(line.split(": ", 1)[1] for line in opened.splitlines() if line.startswith("group: "))
        record = next(r for r in _trail(trainer) if r["id"] == group)
        assert "the user said the food" in opened and "<redacted>" in opened and SECRET not in opened
        assert f"rewards: {json.dumps(record['rewards'], separators=(',', ':'))}".replace("NaN", "null") in opened
        assert all(f"validation: {t['verdict'] or 'abstained'}" in opened for t in record["tests"])
        b.evaluate("[...document.querySelectorAll('.span-select')].find(e => e.innerText.includes('validation:'))"
                   ".click(), 1")
        panel = wait("document.querySelector('.operation-panel')?.innerText")
        test = record["tests"][0]
        assert test["text"].split()[0] in panel and "validation:" in panel
        assert b.errors() == []
        b.screenshot(str(ARTIFACTS / "trackio-evidence.png"))
    finally:
        b.close()
        app.close()
