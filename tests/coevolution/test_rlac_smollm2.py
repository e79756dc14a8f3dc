"""One real RLAC round on CPU: SmolLM2-135M-Instruct on the bundled preference sample, one optimizer step per phase,
through `rlce-trl coevolve` (the real driver, each phase a real subprocess that trains and saves a model). Validation
rows are two UR-FUNNY-style text rows written here (closed labels: scored without a judge)."""

import json
from pathlib import Path

import pytest

from rlce_trl.cli import main
from rlce_trl.coevolution.state import totals
from rlce_trl.data import load_preference_sample
from rlce_trl.data.prompts import SOLVER_SYSTEM_PROMPT

pytestmark = pytest.mark.slow


def _write(path: Path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_one_rlac_round(tmp_path, capsys):
    train = _write(tmp_path / "train.jsonl", load_preference_sample("train")[:2])
    jokes = [("I told my wife she draws her eyebrows too high. She looked surprised.", "humor"),
             ("The meeting is moved to Tuesday at ten.", "not humor")]
    validation = _write(tmp_path / "validation.jsonl", [
        {"id": f"v{i}", "task": "urfunny", "answer_options": ["humor", "not humor"], "gold": gold,
         "prompt": [{"role": "system", "content": SOLVER_SYSTEM_PROMPT},
                    {"role": "user", "content": f"Transcript: {text}\nIs this humor? Options: humor, not humor."}]}
        for i, (text, gold) in enumerate(jokes)])
    out = tmp_path / "run"
    overrides = ["--max_completion_length", "8", "--validation_max_new_tokens", "4", "--coevolve_corpus_size", "2",
                 "--rlac_max_pairs", "2", "--coevolve_phase_overrides",
                 json.dumps({"generator": {"reward_method_kwargs": {"critic_max_tokens": 16,
                                                                    "validator_max_tokens": 2}},
                             "critic": {"reward_method_kwargs": {"validator_max_tokens": 2}}})]
    code = main(["coevolve", "--method", "rlac", "--config", "quickstart_rlac", "--train_file", train,
                 "--validation_file", validation, "--output_dir", str(out), *overrides])
    assert code == 0, capsys.readouterr().err
    state = json.loads((out / "state.json").read_text())
    assert state["done"] and state["failed"] is None and state["round"] == 1
    assert [s["id"] for s in state["steps"]] == ["r0-generator-build", "r0-generator-train", "r0-critic-build",
                                                 "r0-critic-train", "r0-validate"]
    for role in ("generator", "critic"):  # both roles trained one step and were saved
        assert (Path(state["checkpoints"][role]) / "config.json").exists()
    assert state["steps"][1]["result"]["global_step"] == state["steps"][3]["result"]["global_step"] == 1
    # the harvest: one pair per clip from the new generator, capped at M = 2
    assert state["steps"][2]["result"]["pairs"] == 2
    pairs = [json.loads(line) for line in Path(state["data"]["critic"]).read_text().splitlines()]
    assert len(pairs) == 2 and all(isinstance(p["rlac_response"], str) and p["rlac_context"] for p in pairs)
    # validated after the round with the task metric; the best checkpoint is the generator's
    assert len(state["validations"]) == 1 and 0.0 <= state["validations"][0]["score"] <= 1.0
    assert state["best"]["checkpoint"] == state["checkpoints"]["generator"]
    spent = totals(state)
    assert spent["wall_s"] > 0 and spent["cpu_s"] > 0
    trainer_state = json.loads((Path(state["checkpoints"]["generator"]) / "trainer_state.json").read_text())
    assert any("rlac_generator/tests_built" in entry for entry in trainer_state["log_history"])
