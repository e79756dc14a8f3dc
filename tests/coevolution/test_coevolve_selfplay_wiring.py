"""VisPlay and Video-Zero wired into the driver: their phases, the reasoner / solver rewards as group scorers (hand
values), and one round of each through the real driver with the FAKE phase process."""

import json
import sys
from pathlib import Path

import pytest
from run_fake_driver import FAKE

from rlce_trl.coevolution.driver import Coevolver, DriverSettings
from rlce_trl.coevolution.registry import get_method
from rlce_trl.methods import build_scorer
from rlce_trl.scoring import Group


def test_pseudo_label_scorers_hand_values():
    reasoner = build_scorer("visplay_reasoner", None)
    group = Group("ctx", ["\\boxed{humor}", "it is humor", "\\boxed{not humor}"], labels=("humor", "not humor"),
                  columns={"pseudo_label": "humor"})
    (result,), _ = reasoner.score([group])
    assert result.verified == [pytest.approx(1.0), pytest.approx(0.9), pytest.approx(0.1)]  # 0.9 acc + 0.1 boxed
    (none,), _ = reasoner.score([Group("ctx", ["\\boxed{a}"], columns={"pseudo_label": None})])
    assert none.verified == [None]
    solver = build_scorer("vz_solver", None)
    (wrong,), _ = solver.score([Group("ctx", ["\\boxed{sad}"], labels=("happy", "sad"),
                                      columns={"pseudo_label": "happy", "target_span": [0, 4], "clip_seconds": 8})])
    assert wrong.verified == [0.0]  # a wrong answer scores 0 whatever its span


@pytest.mark.parametrize("name, roles, steps", [("visplay", ("questioner", "reasoner"), (20, 20)),
                                                ("video_zero", ("questioner", "solver"), (2, 1))])
def test_phases_and_one_round_through_the_driver(name, roles, steps, tmp_path):
    method = get_method(name, {})
    phases = method.phases(0)
    assert method.roles == roles and method.validated_role == roles[1]
    assert [(p.role, p.max_steps, p.partner_role) for p in phases] == [(roles[0], steps[0], roles[1]),
                                                                      (roles[1], steps[1], None)]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "c0", "prompt": [{"role": "user", "content": "clip text"}], "question": "q"}\n')
    settings = DriverSettings(recipe="r.yaml", train_file=str(corpus), validation_file=None,
                              output_dir=str(tmp_path / "run"), base_model="base", rounds=1,
                              phase_command=[sys.executable, FAKE])
    state = Coevolver(method, settings, log=lambda m: None).run()
    assert state["done"] and [s["id"] for s in state["steps"]] == [
        "r0-questioner-build", "r0-questioner-train", f"r0-{roles[1]}-build", f"r0-{roles[1]}-train"]
    assert Path(state["checkpoints"][roles[1]]).name == "model"


def test_column_reward_scorers_refuse_unknown_options():
    import pytest

    from rlce_trl.methods import build_scorer

    for name in ("visplay_reasoner", "vz_solver"):
        with pytest.raises(TypeError, match="reward_method_kwargs"):
            build_scorer(name, None, typo_option=1)


def _run_selfplay(tmp_path, name, monkeypatch, **settings):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "c0", "prompt": [{"role": "user", "content": "clip text"}], "question": "q"}\n')
    ledger = tmp_path / "ledger.txt"
    monkeypatch.setenv("FAKE_LEDGER", str(ledger))
    validation = tmp_path / "validation.jsonl"
    validation.write_text('{"id": "v0", "prompt": [], "gold": "yes"}\n')
    driver_settings = DriverSettings(recipe="r.yaml", train_file=str(corpus), validation_file=str(validation),
                                     output_dir=str(tmp_path / "run"), base_model="base", rounds=1,
                                     phase_command=[sys.executable, FAKE], settings=settings)
    logs = []
    state = Coevolver(get_method(name, settings), driver_settings, log=logs.append).run()
    return state, ledger.read_text().split("\n"), logs


@pytest.mark.parametrize("name, answerer", [("visplay", "reasoner"), ("video_zero", "solver")])
def test_a_build_that_retains_nothing_skips_the_phase(name, answerer, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_BUILD_EMPTY", f"r0-{answerer}-build")
    state, ledger, logs = _run_selfplay(tmp_path, name, monkeypatch)
    assert state["done"] and state["failed"] is None
    train = next(s for s in state["steps"] if s["id"] == f"r0-{answerer}-train")
    assert train["skipped"].startswith("no rows retained") and train["wall_s"] == 0.0 and train["log"] is None
    assert f"start r0-{answerer}-train" not in ledger  # no process was started for it
    assert state["checkpoints"][answerer] == "base"  # the answerer did not move; the questioner did
    assert Path(state["checkpoints"]["questioner"]).name == "model"
    assert state["validations"][0]["checkpoint"] == "base"  # still validated (round 0: the base model's score)
    assert any(f"train {answerer} skipped (no rows retained" in line for line in logs)
    per_phase = json.loads((tmp_path / "run" / "summary.json").read_text())["per_phase"]
    assert per_phase[f"{answerer}/train"]["runs"] == 0 and per_phase["questioner/train"]["runs"] == 1


def test_patience_stops_after_validations_without_gain(tmp_path):
    method = get_method("video_zero", {"patience": 2})
    settings = DriverSettings(recipe="r.yaml", train_file="t", validation_file="v", output_dir=str(tmp_path),
                              base_model="base", rounds=5, settings={"patience": 2})
    driver = Coevolver(method, settings, log=lambda m: None)

    def state_after(scores):
        validations = [{"round": i, "score": s} for i, s in enumerate(scores)]
        best = max(validations, key=lambda v: (v["score"], -v["round"]))  # ties: the earlier round stays best
        return {"round": len(scores) - 1, "rounds": 5, "done": False, "validations": validations, "best": best}

    for scores, stops in [([0.5, 0.4], False), ([0.5, 0.4, 0.5], True), ([0.5, 0.6, 0.6], False),
                          ([0.5, 0.6, 0.6, 0.1], True)]:
        state = state_after(scores)
        driver._early_stop(state)
        assert state["done"] is stops, scores
        assert ("stopped_early" in state) is stops
    last = state_after([0.5, 0.4, 0.3, 0.2, 0.1])  # the last round ends the run anyway: not an early stop
    driver._early_stop(last)
    assert not last["done"]
    no_patience = Coevolver(method, DriverSettings("r", "t", "v", str(tmp_path), "base", 5), log=lambda m: None)
    state = state_after([0.5, 0.4, 0.3])
    no_patience._early_stop(state)
    assert not state["done"]


def test_build_options_reach_the_builder_and_a_fixed_clip_subset(tmp_path, monkeypatch):
    from fakes import ScriptedVerifier

    from rlce_trl.coevolution import selfplay_methods
    from rlce_trl.coevolution.base import BuildContext
    from rlce_trl.errors import InputError

    with pytest.raises(InputError, match="unknown option.*typo.*n_candidates"):
        get_method("visplay", {"build_kwargs": {"typo": 1}})
    with pytest.raises(InputError, match="unknown option.*n_candidates.*for video_zero"):
        get_method("video_zero", {"build_kwargs": {"n_candidates": 8}})
    with pytest.raises(InputError, match="RLAC's harvest takes no options"):
        get_method("rlac", {"build_kwargs": {"m": 2}})
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(f'{{"id": "c{i}", "prompt": [{{"role": "user", "content": "clip {i}"}}]}}\n'
                              for i in range(6)))
    questioner = ScriptedVerifier(lambda r: "no blocks at all")  # nothing parses: nothing is retained
    monkeypatch.setattr(selfplay_methods, "_frozen", lambda path, cache, video: questioner)
    method = get_method("visplay", {"build_kwargs": {"n_clips": 2, "n_candidates": 3, "m": 2}})
    phase = method.phases(0)[1]
    seen = []
    for round_ in (0, 1):
        out = tmp_path / f"r{round_}.jsonl"
        stats = method.build_data(BuildContext(round_, phase, {"questioner": "q", "reasoner": "r"}, "base",
                                               str(corpus), str(out), seed=5))
        assert out.read_text() == ""  # an empty data file, and the driver is told to skip the phase
        assert stats["retained"] == 0 and stats["generated"] == 6 and stats["dropped"] == {"unparsed": 6}
        assert stats["skip"] == "no reasoner rows retained: 0 of 6 generated questions parsed, dropped unparsed 6"
        batch = questioner.batches[-1]
        assert len(batch) == 2 and batch[0].sampling.n == 3  # n_clips and n_candidates reached the builder
        seen.append([r.messages[-1]["content"] for r in batch])
    assert seen[0] == seen[1]  # the generation subset is drawn once (the run's seed), the same every round


def test_fill_one_batch():
    from rlce_trl.training.pipeline import fill_one_batch  # a step of the one pipeline (every run, each phase)

    rows = [{"id": "a"}, {"id": "b"}]
    assert fill_one_batch(rows, 2) == (rows, 0) and fill_one_batch(rows, 1) == (rows, 0)
    filled, added = fill_one_batch(rows, 5)
    assert [r["id"] for r in filled] == ["a", "b", "a", "b", "a"] and added == 3
    with pytest.raises(ValueError, match="no training rows"):
        fill_one_batch([], 4)
