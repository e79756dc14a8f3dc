"""`rlce-trl compare` without training: the table's arithmetic (mean, sample spread, Δ, device-hours, the ratio to
RLCE, the paper's numbers only for the paper's model), hostile flags refused in one line before anything runs, and the
resume logic (a finished cell is not rerun, a trained cell is only evaluated, changed arguments are refused) with the
subprocess runner replaced by a FAKE that writes what training and evaluation would write."""

import argparse
import json
import math
from pathlib import Path

import pytest

from rlce_trl.cli import main
from rlce_trl.comparison import cells, command, paper
from rlce_trl.comparison import plan as planning
from rlce_trl.comparison.table import build_table, mean_std, to_markdown, write_table
from rlce_trl.errors import InputError


def test_mean_and_sample_spread():
    assert mean_std([]) == (None, None)
    assert mean_std([0.5]) == (0.5, None)
    mean, std = mean_std([1.0, 2.0, 4.0])
    assert mean == pytest.approx(7 / 3) and std == pytest.approx(math.sqrt(((1 - 7 / 3) ** 2 + (2 - 7 / 3) ** 2
                                                                           + (4 - 7 / 3) ** 2) / 2))


def _cells(scores, hours):
    return {(m, s): {"score": v, "device_hours": hours[m]} for m, per_seed in scores.items()
            for s, v in per_seed.items()}


def test_table_arithmetic_and_paper_columns(tmp_path):
    scores = {"rlce": {1: 0.70, 2: 0.72}, "usc": {1: 0.60}}
    cells = _cells(scores, {"rlce": 2.0, "usc": 8.0})
    table = build_table("mosei", paper.PAPER_MODEL, ["rlce", "usc"], [1, 2], cells, {"score": 0.65})
    rlce, usc = table["rows"]
    assert rlce["mean"] == 71.0 and rlce["std"] == pytest.approx(1.41, abs=0.01) and rlce["delta"] == 6.0
    assert rlce["seeds"] == {"1": 70.0, "2": 72.0} and rlce["missing_seeds"] == []
    assert usc["mean"] == 60.0 and usc["std"] is None and usc["delta"] == -5.0 and usc["missing_seeds"] == [2]
    assert usc["device_hours_x_rlce"] == 4.0 and rlce["device_hours_total"] == 4.0
    assert (rlce["paper_mean"], rlce["paper_std"], rlce["paper_delta"]) == (70.93, 1.13, 6.07)
    assert table["base"]["paper"] == 64.86 and not table["complete"]
    text = to_markdown(table)
    assert "71.00 ± 1.41" in text and "+6.00" in text and "70.93 ± 1.13" in text and "not finished: 2" in text
    # another model: no paper column, and the note says why
    other = build_table("mosei", "my/model", ["rlce"], [1, 2], cells, {"score": 0.65})
    assert other["rows"][0]["paper_mean"] is None and "(paper)" not in to_markdown(other)
    paths = write_table(table, tmp_path)
    assert json.loads(paths["json"].read_text())["rows"][0]["mean"] == 71.0
    assert paths["png"].read_bytes()[:4] == b"\x89PNG"


def test_ablation_rows_take_tables_3_4():
    cells = _cells({"rlce_static": {1: 0.5}}, {"rlce_static": 1.0})
    row = build_table("prefeval", paper.PAPER_MODEL, ["rlce_static"], [1], cells, None)["rows"][0]
    assert (row["paper_mean"], row["paper_std"]) == (46.57, None) and row["delta"] is None


def _args(tmp_path, *extra):
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    prompts = tmp_path / "prompts"
    prompts.mkdir(exist_ok=True)
    return parser.parse_args(["--task", "prefeval", "--methods", "rlce,usc", "--seeds", "1,2", "--data", "sample",
                              "--prefeval_dir", str(prompts), "--judge_base_url", "http://127.0.0.1:9/v1",
                              "--judge_model", "j", "--output_dir", str(tmp_path / "out"), *extra])


@pytest.mark.parametrize(("flags", "needle"), [
    (["--task", "nope"], "--task 'nope'"),
    (["--methods", "rlce,rlce"], "twice"),
    (["--methods", "rlac_x"], "no shipped recipe"),
    (["--seeds", "1,x"], "integers"),
    (["--seeds", "1,1"], "distinct"),
    (["--launcher", "no-such-launcher --x"], "not an executable"),
    (["--data", "/nonexistent"], "prepare-prefeval"),
    (["--judge_base_url", "127.0.0.1:8000"], "http://"),
    (["--devices", "0"], "--devices 0"),
    (["--validation_steps", "0"], "--validation_steps 0"),
    (["--", "max_steps", "2"], "after `--`"),
])
def test_hostile_flags_are_one_line_errors_naming_the_fix(tmp_path, capsys, flags, needle):
    base = _args(tmp_path)
    argv = ["compare", "--task", "prefeval", "--methods", "rlce,usc", "--seeds", "1,2", "--data", "sample",
            "--prefeval_dir", base.prefeval_dir, "--judge_base_url", "http://127.0.0.1:9/v1", "--judge_model", "j",
            "--output_dir", str(tmp_path / "out")]
    overrides = []
    if "--" in flags:
        overrides, flags = flags[flags.index("--"):], flags[:flags.index("--")]
    for i in range(0, len(flags), 2):  # replace a flag that is already there
        if flags[i] in argv:
            argv[argv.index(flags[i]) + 1] = flags[i + 1]
        else:
            argv += flags[i:i + 2]
    assert main(argv + overrides) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and needle in err and "\n" not in err
    assert not (tmp_path / "out").exists()  # nothing ran, nothing written


def test_hba_task_needs_its_splits_and_free_text_needs_the_judge(tmp_path):
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    args = parser.parse_args(["--task", "mosei", "--methods", "rlce", "--output_dir", str(tmp_path / "o")])
    with pytest.raises(InputError, match="--train_file"):
        planning.make_plan(args)
    for name in ("train", "validation", "test"):
        (tmp_path / f"{name}.jsonl").write_text("{}\n")
    args = parser.parse_args(["--task", "intentqa", "--methods", "rlce", "--output_dir", str(tmp_path / "o"),
                              "--train_file", str(tmp_path / "train.jsonl"), "--validation_file",
                              str(tmp_path / "validation.jsonl"), "--test_file", str(tmp_path / "test.jsonl"),
                              "--media_root", str(tmp_path)])
    with pytest.raises(InputError, match="judge_base_url"):
        planning.make_plan(args)


def test_cells_follow_the_papers_protocol(tmp_path):
    args = _args(tmp_path, "--methods", "rlce,usc,rar", "--", "--max_steps", "2")
    plan = planning.make_plan(args)
    argv = {m: cells.train_arguments(args, plan, m, 1) for m in plan["methods"]}
    value = {m: dict(zip(a[3::1], a[4::1], strict=False)) for m, a in argv.items()}
    assert value["rlce"]["--validation_steps"] == "6" and "--validation_patience" not in argv["rlce"]
    assert value["usc"]["--validation_steps"] == "12"
    assert value["rar"]["--validation_steps"] == "12" and value["rar"]["--validation_patience"] == "6"
    assert all(a[-2:] == ["--max_steps", "2"] and a[:3] == ["-m", "rlce_trl.cli", "train"] for a in argv.values())
    assert plan["model"] == paper.PAPER_MODEL and plan["devices"] == 1


def test_devices_from_the_launcher(tmp_path):
    accel = tmp_path / "accel.yaml"
    accel.write_text("num_processes: 3\n")
    assert planning._devices_of(["torchrun", "--nproc_per_node", "4"]) == 4
    assert planning._devices_of(["accelerate", "launch", "--num_processes=2"]) == 2
    assert planning._devices_of(["accelerate", "launch", "--config_file", str(accel)]) == 3
    assert planning._devices_of(["python"]) == 1


class FakeRunner:
    """A FAKE of `cells._run`: training writes a best checkpoint and best.json, evaluation a summary.json whose
    score depends on the cell; every call is recorded."""

    def __init__(self):
        self.calls = []

    def __call__(self, cmd, log, what):
        self.calls.append(what)
        out = Path(cmd[cmd.index("--output_dir") + 1])
        out.mkdir(parents=True, exist_ok=True)
        if "training" in what:
            (out / "best").mkdir()
            (out / "best" / "config.json").write_text("{}")
            (out / "best.json").write_text(json.dumps({"best_step": 1, "best_score": 0.5}))
            return 3600.0  # one hour on the plan's devices
        seed = 0 if "base" in what else int(what.split("seed ")[1].split(":")[0])
        score = 0.4 if "base" in what else 0.5 + 0.1 * seed + (0.1 if what.startswith("rlce") else 0.0)
        (out / "summary.json").write_text(json.dumps({"score": score}))
        return 36.0


def test_resume_skips_finished_cells_and_refuses_changed_arguments(tmp_path, monkeypatch, capsys):
    fake = FakeRunner()
    monkeypatch.setattr(cells, "_run", fake)
    args = _args(tmp_path, "--devices", "2")
    assert command.main(args) == 0
    assert fake.calls.count("base model: test evaluation") == 1 and len(fake.calls) == 1 + 4 * 2
    table = json.loads((tmp_path / "out" / "comparison.json").read_text())
    rlce, usc = table["rows"]
    assert rlce["seeds"] == {"1": 70.0, "2": 80.0} and usc["seeds"] == {"1": 60.0, "2": 70.0}
    assert table["base"]["score"] == 40.0 and rlce["delta"] == 35.0 and usc["delta"] == 25.0
    assert rlce["device_hours_per_run"] == pytest.approx(2.01) and usc["device_hours_x_rlce"] == 1.0
    # the same command again: nothing runs
    fake.calls.clear()
    assert command.main(args) == 0 and fake.calls == []
    # a cell whose evaluation is lost (done.json gone, train.json kept) is evaluated again, not retrained
    (tmp_path / "out" / "usc" / "seed2" / "done.json").unlink()
    assert command.main(args) == 0 and fake.calls == ["usc seed 2: test evaluation"]
    # changed arguments for a trained cell: refused with the fix
    (tmp_path / "out" / "usc" / "seed2" / "done.json").unlink()
    changed = _args(tmp_path, "--devices", "2", "--", "--max_steps", "3")
    with pytest.raises(InputError, match="other arguments"):
        command.main(changed)


def test_a_failed_cell_stops_the_grid_and_names_its_log(tmp_path, monkeypatch, capsys):
    def failing(cmd, log, what):
        raise cells.CellFailedError(f"{what} failed (exit 1): boom (log: {log})")

    monkeypatch.setattr(cells, "_run", failing)
    assert command.main(_args(tmp_path)) == 1
    err = capsys.readouterr().err
    assert "base model: test evaluation failed (exit 1): boom" in err
    assert (tmp_path / "out" / "comparison.md").is_file()


class CheckpointRunner(FakeRunner):
    """A FAKE for `--selection checkpoints`: training saves checkpoint-2, 4, ..., 20 and a final model; validation
    scores step 4 best and every later one lower (so patience decides how many are validated)."""

    STEPS = list(range(2, 22, 2))

    def __call__(self, cmd, log, what):
        if "training" in what:
            self.calls.append(what)
            out = Path(cmd[cmd.index("--output_dir") + 1])
            for step in self.STEPS:
                (out / f"checkpoint-{step}").mkdir(parents=True)
                (out / f"checkpoint-{step}" / "config.json").write_text("{}")
            (out / "config.json").write_text("{}")
            assert cmd[cmd.index("--save_steps") + 1] == "12" and "--validation_steps" not in cmd
            return 60.0
        if "validation of step" in what:
            self.calls.append(what)
            out = Path(cmd[cmd.index("--output_dir") + 1])
            out.mkdir(parents=True, exist_ok=True)
            assert cmd[cmd.index("--split") + 1] == "validation"
            step = out.name.split("-")[1]
            score = 0.3 if step == "2" else 0.6 if step == "4" else 0.5
            (out / "summary.json").write_text(json.dumps({"score": score}))
            return 10.0
        return super().__call__(cmd, log, what)


@pytest.mark.parametrize(("method", "validated"), [
    ("usc", [*map(str, CheckpointRunner.STEPS), "final"]),  # no patience: every checkpoint
    ("rar", ["2", "4", "6", "8", "10", "12", "14", "16"]),  # Table 10: stop after 6 without improvement
])
def test_checkpoint_selection_validates_after_training(tmp_path, monkeypatch, method, validated):
    fake = CheckpointRunner()
    monkeypatch.setattr(cells, "_run", fake)
    args = _args(tmp_path, "--methods", method, "--seeds", "1", "--selection", "checkpoints", "--skip_base")
    assert command.main(args) == 0  # every cell finished (the base model skipped)
    train = json.loads((tmp_path / "out" / method / "seed1" / "train.json").read_text())
    assert train["best_step"] == 4 and train["checkpoint"].endswith("checkpoint-4") and train["best_validation"] == 0.6
    assert [str(v["step"]) for v in train["validations"]] == validated
    assert train["device_hours"] == pytest.approx(60 / 3600 + len(validated) * 10 / 3600)
    done = json.loads((tmp_path / "out" / method / "seed1" / "done.json").read_text())
    assert done["checkpoint"] == train["checkpoint"]


def test_zero3_launcher_picks_checkpoint_selection(tmp_path):
    from rlce_trl.training.recipes import recipes_dir

    zero3 = recipes_dir() / "accelerate" / "zero3.yaml"
    multi = recipes_dir() / "accelerate" / "multi_gpu.yaml"
    assert planning._zero3(["accelerate", "launch", "--config_file", str(zero3)])
    assert not planning._zero3(["accelerate", "launch", "--config_file", str(multi)]) and not planning._zero3(["x"])


def test_coevolution_cell_reads_the_drivers_state(tmp_path, monkeypatch):
    for name in ("train", "validation", "test"):
        (tmp_path / f"{name}.jsonl").write_text("{}\n")
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    args = parser.parse_args(["--task", "mosei", "--methods", "visplay", "--seeds", "7", "--output_dir",
                              str(tmp_path / "out"), "--train_file", str(tmp_path / "train.jsonl"),
                              "--validation_file", str(tmp_path / "validation.jsonl"), "--test_file",
                              str(tmp_path / "test.jsonl"), "--media_root", str(tmp_path), "--skip_base"])
    plan = planning.make_plan(args)
    argv = cells.train_arguments(args, plan, "visplay", 7)
    assert argv[:5] == ["-m", "rlce_trl.cli", "coevolve", "--method", "visplay"] and "--coevolve_launcher" not in argv
    calls = []

    def fake(cmd, log, what):  # a FAKE driver run: state.json as the co-evolution driver writes it
        calls.append(what)
        out = Path(cmd[cmd.index("--output_dir") + 1])
        out.mkdir(parents=True, exist_ok=True)
        if "training" in what:
            state = {"best": {"round": 1, "score": 0.7, "checkpoint": str(out / "round-1" / "reasoner")},
                     "steps": [{"device_hours": 1.5}, {"device_hours": 2.5}]}
            (out / "state.json").write_text(json.dumps(state))
            return 100.0
        (out / "summary.json").write_text(json.dumps({"score": 0.66}))
        return 36.0

    monkeypatch.setattr(cells, "_run", fake)
    record = cells.run_cell(args, plan, "visplay", 7, log=lambda _: None)
    assert record["checkpoint"].endswith("round-1/reasoner") and record["best_round"] == 1
    assert record["device_hours"] == pytest.approx(4.0 + 0.01) and record["score"] == 0.66


def test_prefeval_folder_refuses_row_limits_it_cannot_apply(tmp_path):
    data = tmp_path / "prefeval"
    for form in ("explicit", "choice", "persona"):
        for split in ("train", "validation", "test"):
            (data / form).mkdir(parents=True, exist_ok=True)
            (data / form / f"{split}.jsonl").write_text("{}\n")
    with pytest.raises(InputError, match="--test_limit applies to a single test file"):
        planning.make_plan(_args(tmp_path, "--data", str(data), "--test_limit", "3"))
    with pytest.raises(InputError, match="drop --validation_limit"):
        planning.make_plan(_args(tmp_path, "--data", str(data), "--validation_limit", "3", "--selection",
                                "checkpoints"))
    assert planning.make_plan(_args(tmp_path, "--data", str(data)))["selection"] == "in_training"


def test_missing_matplotlib_is_named_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(planning, "_has_matplotlib", lambda: False)
    with pytest.raises(InputError, match=r"rlce-trl\[analysis\]"):
        planning.make_plan(_args(tmp_path))


def _task_args(tmp_path, *extra):
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    task = Path(__file__).parents[2] / "examples" / "own_task" / "parity.yaml"
    return parser.parse_args(["--task", str(task), "--methods", "rlce,usc", "--seeds", "1",
                              "--output_dir", str(tmp_path / "out"), *extra])


def test_a_user_task_file_is_compared_with_the_text_recipes(tmp_path, monkeypatch):
    """`rlce-trl compare --task my_task.yaml`: the cells train and evaluate on the task file's splits with the
    shipped text recipes (PrefEval's schedule), and the table names the task and its metric, no paper numbers."""
    args = _task_args(tmp_path, "--", "--model_name_or_path", "smollm2")
    plan = planning.make_plan(args)
    task_file = plan["task_file"]
    assert plan["task"] == "parity" and plan["recipe_task"] == "prefeval" and Path(task_file).is_file()
    train = cells.train_arguments(args, plan, "rlce", 1)
    assert train[train.index("--task") + 1] == task_file and "--dataset_name" not in train
    assert train[train.index("--config") + 1].endswith("prefeval_rlce.yaml")
    assert train[train.index("--validation_steps") + 1] == "6"  # PrefEval's RLCE schedule: every second cycle
    test = cells.eval_arguments(args, plan, "ckpt", tmp_path / "t")
    assert test[test.index("--task") + 1] == task_file and test[test.index("--split") + 1] == "test"
    validation = cells.eval_arguments(args, plan, "ckpt", tmp_path / "v", split="validation")
    assert validation[validation.index("--split") + 1] == "validation" and "--hba_task" not in validation
    fake = FakeRunner()
    monkeypatch.setattr(cells, "_run", fake)
    assert command.main(args) == 0 and len(fake.calls) == 1 + 2 * 2
    table = json.loads((tmp_path / "out" / "comparison.json").read_text())
    assert table["task"] == "parity" and table["column"] == "Number parity" and table["metric"] == "accuracy"
    assert table["base"]["paper"] is None and all(r["paper_mean"] is None for r in table["rows"])


@pytest.mark.parametrize(("extra", "needle"), [
    (["--methods", "rlac"], "co-evolution method does not take a task file"),
    (["--recipe_task", "nope"], "--recipe_task 'nope'"),
    (["--train_file", "x.jsonl"], "--train_file with a task file"),
    (["--recipe_task", "mosei", "--", "--model_name_or_path", "smollm2"], None),  # another task's recipes: fine
])
def test_task_file_problems_in_compare_are_one_line(tmp_path, extra, needle):
    args = _task_args(tmp_path, *extra)
    if needle is None:
        assert planning.make_plan(args)["recipe_task"] == "mosei"
        return
    with pytest.raises(InputError, match=needle):
        planning.make_plan(args)


def test_a_task_file_without_a_test_split_or_an_unknown_task_name(tmp_path, capsys):
    (tmp_path / "train.jsonl").write_text('{"text": "a", "label": "x"}\n')
    (tmp_path / "t.yaml").write_text("name: tiny\ndata: {train: train.jsonl, validation: train.jsonl}\n"
                                     "prompt_column: text\nlabels: [x, y]\ngold: label\n")
    assert main(["compare", "--task", str(tmp_path / "t.yaml"), "--methods", "rlce", "--output_dir",
                 str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "no 'test' split" in err and "\n" not in err
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    with pytest.raises(InputError, match="--recipe_task applies to a task file"):
        planning.make_plan(parser.parse_args(["--task", "prefeval", "--recipe_task", "mosei", "--methods", "rlce",
                                              "--output_dir", str(tmp_path / "o")]))
    with pytest.raises(InputError, match="or your task file"):
        planning.make_plan(parser.parse_args(["--task", "parity", "--methods", "rlce", "--output_dir",
                                              str(tmp_path / "o")]))
