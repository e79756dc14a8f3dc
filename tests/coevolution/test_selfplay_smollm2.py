"""One real VisPlay round and one real Video-Zero round on CPU: SmolLM2-135M-Instruct on the bundled preference
sample, one optimizer step per phase, through `rlce-trl coevolve` (the real driver, each step a real subprocess that
trains, builds or validates with the real model). Validation rows are two UR-FUNNY-style text rows (closed labels:
scored without a judge).

A 135M model rarely writes the questioner's tags, so the pseudo-label filter may retain nothing: the round then
records the answerer phase as skipped (its checkpoint stays) and the test checks that; when rows are retained it
checks that the answerer trained on them. Either way, the answerer's train phase also runs once for real on rows the
method's own row builder made, so the step from pseudo-labelled rows to a trained answerer is always exercised."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlce_trl.cli import main
from rlce_trl.coevolution.base import PhaseSpec
from rlce_trl.coevolution.state import totals
from rlce_trl.data import load_preference_sample
from rlce_trl.data.prompts import SOLVER_SYSTEM_PROMPT
from rlce_trl.models import resolve_model
from rlce_trl.training.recipes import resolve_recipe

pytestmark = pytest.mark.slow

ANSWERER = {"visplay": "reasoner", "video_zero": "solver"}


def _write(path: Path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _validation(tmp_path: Path) -> str:
    jokes = [("I told my wife she draws her eyebrows too high. She looked surprised.", "humor"),
             ("The meeting is moved to Tuesday at ten.", "not humor")]
    return _write(tmp_path / "validation.jsonl", [
        {"id": f"v{i}", "task": "urfunny", "answer_options": ["humor", "not humor"], "gold": gold,
         "prompt": [{"role": "system", "content": SOLVER_SYSTEM_PROMPT},
                    {"role": "user", "content": f"Transcript: {text}\nIs this humor? Options: humor, not humor."}]}
        for i, (text, gold) in enumerate(jokes)])


def _answerer_rows(method: str, clips: list[dict]) -> list[dict]:
    """Pseudo-labelled rows as the method's builder writes them (its row builder, a label per clip)."""
    if method == "visplay":
        from rlce_trl.methods.visplay import reasoner_row

        return [reasoner_row(c, "What does the user avoid?", "boats", 0.5) for c in clips]
    from rlce_trl.methods.video_zero import solver_row

    return [solver_row(c, "What does the user avoid?", "boats", None, None, 0.5) for c in clips]


def _train_answerer_for_real(method: str, tmp_path: Path, clips: list[dict]) -> dict:
    """The answerer's train step as the driver starts it (`python -m rlce_trl.coevolution.phase --job`)."""
    answerer = ANSWERER[method]
    base = resolve_model("smollm2-135m-instruct")
    step_dir = tmp_path / "answerer-train"
    step_dir.mkdir()
    phase = PhaseSpec(answerer, answerer, "visplay_reasoner" if method == "visplay" else "vz_solver", max_steps=1,
                      overrides={"max_completion_length": 8})
    job = {"kind": "train", "method": method, "round": 0, "step": f"r0-{answerer}-train", "phase": phase.to_dict(),
           "recipe": str(resolve_recipe(f"quickstart_{method}")), "train_file": "unused", "validation_file": None,
           "base_model": base, "checkpoints": {"questioner": base, answerer: base}, "output_dir": str(step_dir),
           "extra_args": [], "seed": 42, "data": {}, "start_model": base, "partner": None,
           "data_file": _write(tmp_path / "answerer_rows.jsonl", _answerer_rows(method, clips[:1]))}
    (step_dir / "job.json").write_text(json.dumps(job))
    done = subprocess.run([sys.executable, "-m", "rlce_trl.coevolution.phase", "--job", str(step_dir / "job.json")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    report = json.loads((step_dir / "report.json").read_text())["result"]
    history = json.loads((step_dir / "model" / "trainer_state.json").read_text())["log_history"]
    return report, history


@pytest.mark.parametrize("method", ["visplay", "video_zero"])
def test_one_selfplay_round(method, tmp_path, capsys):
    answerer = ANSWERER[method]
    clips = load_preference_sample("train")[:2]
    train = _write(tmp_path / "train.jsonl", clips)
    out = tmp_path / "run"
    code = main(["coevolve", "--method", method, "--config", f"quickstart_{method}", "--train_file", train,
                 "--validation_file", _validation(tmp_path), "--output_dir", str(out), "--max_completion_length", "16",
                 "--validation_max_new_tokens", "4"])
    assert code == 0, capsys.readouterr().err
    state = json.loads((out / "state.json").read_text())
    assert state["done"] and state["failed"] is None and state["round"] == 1
    steps = {s["id"]: s for s in state["steps"]}
    assert list(steps) == ["r0-questioner-build", "r0-questioner-train", f"r0-{answerer}-build",
                           f"r0-{answerer}-train", "r0-validate"]
    # the questioner's rows: one per clip of the corpus; it trained one step against the frozen answerer and was saved
    assert steps["r0-questioner-build"]["result"] == {"rows": 2}
    assert steps["r0-questioner-train"]["result"]["global_step"] == 1
    assert (Path(state["checkpoints"]["questioner"]) / "config.json").exists()
    # the answerer's data: the new questioner wrote, the frozen answerer pseudo-labelled; every candidate accounted for
    built = steps[f"r0-{answerer}-build"]["result"]
    generated = 4 if method == "visplay" else 2  # VisPlay: N = 2 per clip; Video-Zero: one question per clip
    assert built["clips"] == 2 and built["generated"] == generated
    assert built["parsed"] + built["dropped"].get("unparsed", 0) == generated
    assert built["retained"] + sum(v for k, v in built["dropped"].items() if k != "unparsed") == built["parsed"]
    rows = [json.loads(line) for line in Path(state["data"][answerer]).read_text().splitlines()]
    assert len(rows) == built["retained"] and all(r["pseudo_label"] and "gold" not in r for r in rows)
    trained = steps[f"r0-{answerer}-train"]
    if built["retained"]:  # the answerer trained one step on exactly those rows
        assert trained["result"]["global_step"] == 1 and trained["result"]["rows"] == built["retained"]
        assert (Path(state["checkpoints"][answerer]) / "config.json").exists()
    else:  # nothing retained: the phase is skipped, said so, and the answerer stays the backbone
        assert trained["skipped"].startswith(f"no {answerer} rows retained: {built['parsed']} of {generated}")
        assert state["checkpoints"][answerer] == state["base_model"] and trained["wall_s"] == 0.0
        assert f"train {answerer} skipped" in capsys.readouterr().out
    # validated after the round with the task metric; the result is the answerer's checkpoint
    assert len(state["validations"]) == 1 and 0.0 <= state["validations"][0]["score"] <= 1.0
    assert state["best"]["checkpoint"] == state["checkpoints"][answerer]
    spent = totals(state)  # the logged hours: every step that ran has wall and CPU time; on CPU no device-hours
    assert spent["wall_s"] > 0 and spent["cpu_s"] > 0 and spent["device_hours"] == 0.0
    for ran in ("r0-questioner-train", f"r0-{answerer}-build", "r0-validate"):  # each its own process
        assert steps[ran]["wall_s"] > 0 and steps[ran]["cpu_s"] > 0, ran
    summary = json.loads((out / "summary.json").read_text())
    assert summary["per_phase"]["questioner/train"]["runs"] == 1

    report, history = _train_answerer_for_real(method, tmp_path, clips)
    assert report["global_step"] == 1 and report["rows"] == 1 and report["rows_repeated"] == 0
    rewards = [e["reward"] for e in history if "reward" in e]
    high = 1.0 if method == "visplay" else 1.5  # r_R <= 0.9 + 0.1; r_S <= 1 * (1 + 0.5)
    assert rewards and all(0.0 <= r <= high for r in rewards)
