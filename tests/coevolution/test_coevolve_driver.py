"""The co-evolution driver with a FAKE phase process (fake_phase.py, milliseconds per step): data flow between phases,
state.json, resume after SIGKILL of a real driver process, a failing phase."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from run_fake_driver import settings

from rlce_trl.coevolution.driver import Coevolver, PhaseFailedError, round_steps
from rlce_trl.coevolution.phase import phase_argv
from rlce_trl.coevolution.registry import get_method
from rlce_trl.errors import InputError
from rlce_trl.methods.rlac import GENERATOR_INSTRUCTION

HERE = Path(__file__).parent


@pytest.fixture
def files(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    rows = [{"id": f"c{i}", "prompt": [{"role": "user", "content": f"clip {i}"}], "question": f"q{i}"}
            for i in range(3)]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    validation = tmp_path / "validation.jsonl"
    validation.write_text(json.dumps({"id": "v", "prompt": [], "gold": "a", "answer_options": ["a", "b"]}) + "\n")
    return str(corpus), str(validation)


def run(out, files, rounds=2, resume=False):
    return Coevolver(get_method("rlac", {}), settings(str(out), *files, rounds), log=lambda m: None).run(resume)


def weights(path):
    return (Path(path) / "weights.txt").read_text()


def fingerprint(state):
    """What a run produced, independent of its folder."""
    return ([weights(state["checkpoints"][r]) for r in ("generator", "critic")],
            [(v["round"], v["score"], weights(v["checkpoint"])) for v in state["validations"]],
            weights(state["best"]["checkpoint"]), [(s["id"], s["result"].get("generator")) for s in state["steps"]])


def test_rounds_and_data_flow(tmp_path, files):
    state = run(tmp_path / "run", files)
    assert state["done"] and state["round"] == 2
    ids = [s["id"] for s in state["steps"]]
    assert ids == [f"r{r}-{s}" for r in (0, 1) for s in ("generator-build", "generator-train", "critic-build",
                                                         "critic-train", "validate")]
    jobs = {s["id"]: json.loads((Path(state["checkpoints"]["generator"]).parent.parent.parent / f"round-{s['round']}"
                                 / s["id"].split("-", 1)[1] / "job.json").read_text()) for s in state["steps"]}
    # round 0: both roles start from the backbone; the critic is the backbone, so no separate partner is loaded
    assert jobs["r0-generator-train"]["start_model"] == "base-model" and jobs["r0-generator-train"]["partner"] is None
    data_file = Path(jobs["r0-generator-train"]["data_file"])
    generator_data = [json.loads(line) for line in data_file.read_text().splitlines()]
    assert len(generator_data) == 3 and GENERATOR_INSTRUCTION in generator_data[0]["prompt"][0]["content"]
    # the harvest reads the NEW generator; the critic trains on the harvest
    g0 = jobs["r0-critic-build"]["checkpoints"]["generator"]
    assert g0 == jobs["r1-generator-train"]["start_model"] and g0.endswith("round-0/generator-train/model")
    assert state["steps"][2]["result"]["generator"] == weights(g0)
    assert jobs["r0-critic-train"]["data_file"] == jobs["r0-critic-build"]["data_file"]
    # round 1: the generator plays the round-0 critic (the partner), the critic continues from its checkpoint
    c0 = jobs["r1-generator-train"]["partner"]
    assert c0.endswith("round-0/critic-train/model") and jobs["r1-critic-train"]["start_model"] == c0
    assert "--verifier_model_name_or_path" in phase_argv(jobs["r1-generator-train"])  # the validator stays θ0
    assert "--verifier_model_name_or_path" not in phase_argv(jobs["r0-generator-train"])
    argv = phase_argv(jobs["r1-generator-train"])
    assert argv[argv.index("--partner_model_name_or_path") + 1] == c0
    assert argv[argv.index("--reward_method") + 1] == "rlac_generator"
    assert "--partner_model_name_or_path" not in phase_argv(jobs["r1-critic-train"])
    # validation after every round, best kept
    scores = [v["score"] for v in state["validations"]]
    assert len(scores) == 2 and state["best"]["score"] == max(scores)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["result_checkpoint"] == state["best"]["checkpoint"]
    assert summary["per_phase"]["generator/train"]["runs"] == 2
    assert all(s["wall_s"] >= 0 and s["device_hours"] == 0 for s in state["steps"])  # no GPU here


def test_no_validation_file_keeps_the_last_generator(tmp_path, files):
    state = run(tmp_path / "run", (files[0], None), rounds=1)
    assert [s["kind"] for s in state["steps"]] == ["build", "train", "build", "train"]
    assert state["best"] is None and state["validations"] == []


def test_kill_between_phases_then_resume(tmp_path, files):
    reference = run(tmp_path / "reference", files)
    out, ledger = tmp_path / "killed", tmp_path / "ledger.txt"
    env = {**os.environ, "FAKE_LEDGER": str(ledger), "FAKE_PHASE_SLEEP": "2",
           "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parents[1] / "src"), os.environ.get("PYTHONPATH", "")])}
    driver = subprocess.Popen([sys.executable, str(HERE / "run_fake_driver.py"), str(out), *files, "2"], env=env,
                              start_new_session=True, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # kill once the first train phase is done and recorded
        try:
            if len(json.loads((out / "state.json").read_text())["steps"]) >= 2:
                break
        except (OSError, json.JSONDecodeError):
            pass
        time.sleep(0.05)
    os.kill(driver.pid, signal.SIGKILL)  # the driver only; its running phase dies with it (PDEATHSIG)
    driver.wait(timeout=30)
    killed = json.loads((out / "state.json").read_text())
    assert 2 <= len(killed["steps"]) < 10 and not killed["done"]
    time.sleep(0.5)
    resumed = subprocess.run([sys.executable, str(HERE / "run_fake_driver.py"), str(out), *files, "2", "--resume"],
                             env={**env, "FAKE_PHASE_SLEEP": "0"}, timeout=120, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    state = json.loads((out / "state.json").read_text())
    assert state["done"] and fingerprint(state) == fingerprint(reference)
    ends = [line.split()[1] for line in ledger.read_text().splitlines() if line.startswith("end")]
    assert sorted(ends) == sorted(set(ends)), "a finished phase ran twice"
    assert [s["id"] for s in state["steps"]] == [s["id"] for s in reference["steps"]]


def test_failing_phase_leaves_a_consistent_state(tmp_path, files, monkeypatch):
    monkeypatch.setenv("FAKE_PHASE_FAIL", "r0-critic-train")
    out = tmp_path / "run"
    with pytest.raises(PhaseFailedError) as caught:
        run(out, files)
    message = str(caught.value)
    log = out / "logs" / "r0-critic-train.log"
    assert "phase 'critic' (train)" in message and str(log) in message and "--resume" in message
    assert "something broke" in message and "\n" not in message  # one line, with the log's last line
    state = json.loads((out / "state.json").read_text())
    assert state["failed"]["step"] == "r0-critic-train" and state["failed"]["log"] == str(log)
    assert [s["id"] for s in state["steps"]] == ["r0-generator-build", "r0-generator-train", "r0-critic-build"]
    assert state["step"] == 3 and state["checkpoints"]["critic"] == "base-model"
    monkeypatch.delenv("FAKE_PHASE_FAIL")
    with pytest.raises(InputError, match="--resume"):
        run(out, files)  # an existing run is never overwritten silently
    state = run(out, files, resume=True)
    assert state["done"] and state["failed"] is None and len(state["steps"]) == 10


def test_resume_needs_a_state_and_the_same_method(tmp_path, files):
    with pytest.raises(InputError, match="no state.json"):
        run(tmp_path / "none", files, resume=True)
    run(tmp_path / "run", files, rounds=1)
    state_file = tmp_path / "run" / "state.json"
    state = json.loads(state_file.read_text())
    state_file.write_text(json.dumps({**state, "method": "visplay"}))
    with pytest.raises(InputError, match="holds a visplay run"):
        run(tmp_path / "run", files, resume=True)


def test_round_steps_follow_the_method(files):
    steps = round_steps(get_method("rlac", {"phase_steps": {"generator": 2}}), 3, settings("o", *files, 5))
    assert [s["id"] for s in steps] == ["r3-generator-build", "r3-generator-train", "r3-critic-build",
                                        "r3-critic-train", "r3-validate"]
    assert steps[1]["phase"]["max_steps"] == 2 and steps[3]["phase"]["max_steps"] == 18  # Table 15 default


def test_analyze_includes_coevolve_runs(tmp_path, files, capsys):
    from rlce_trl.cli import main

    state = run(tmp_path / "rlac", files)
    rlce = tmp_path / "rlce"
    rlce.mkdir()
    (rlce / "trainer_state.json").write_text(json.dumps({"log_history": [{"loss": 1}, {"train_runtime": 3600.0}]}))
    assert main(["analyze", "coevolve", str(tmp_path / "rlac"), "--rlce", str(rlce), "--rlce_gpus", "2"]) == 0
    text = capsys.readouterr().out
    scores = [f"{100 * v['score']:.2f}" for v in state["validations"]]
    assert "| rlac | rlac | " + " | ".join(scores) + f" | round {state['best']['round']} |" in text
    assert "generator / train | 2 |" in text and "RLCE reference: 2.00 device-hours" in text
    assert main(["analyze", "coevolve", str(tmp_path / "nothing")]) == 2
    assert "No state.json" in capsys.readouterr().err


def test_a_finished_but_unrecorded_step_is_not_rerun(tmp_path, files, monkeypatch):
    ledger = tmp_path / "ledger.txt"
    monkeypatch.setenv("FAKE_LEDGER", str(ledger))
    out = tmp_path / "run"
    reference = run(out, files, rounds=1)
    state = json.loads((out / "state.json").read_text())  # the driver died after the phase, before recording it
    state["steps"].pop()
    state["validations"], state["best"], state["step"], state["round"], state["done"] = [], None, 4, 0, False
    (out / "state.json").write_text(json.dumps(state))
    resumed = run(out, files, rounds=1, resume=True)
    assert ledger.read_text().count("end r0-validate") == 1 and resumed["best"] == reference["best"]
