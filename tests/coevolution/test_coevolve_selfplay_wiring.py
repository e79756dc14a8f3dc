"""VisPlay and Video-Zero wired into the driver: their phases, the reasoner / solver rewards as group scorers (hand
values), and one round of each through the real driver with the FAKE phase process."""

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
