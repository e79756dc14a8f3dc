"""A user's own task file (`rlce_trl.data.tasks`): rows in the package's format, the gold column only in evaluation
rows, and every problem one line before any model loads; the task registry that evaluation scores with."""

import json

import pytest

from rlce_trl.data.tasks import TASKS, get_task, judge_of, load_task, plain_rows
from rlce_trl.errors import InputError
from rlce_trl.evaluation.metrics import task_score

SPEC = """name: parity
data: {train: train.jsonl, test: test.jsonl}
prompt: "Is {number} even or odd?"
labels: [even, odd]
gold: parity
metric: accuracy
"""


@pytest.fixture
def folder(tmp_path):
    rows = [{"number": n, "parity": "even" if n % 2 == 0 else "odd"} for n in range(10, 16)]
    for split in ("train", "test"):
        (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "task.yaml").write_text(SPEC)
    return tmp_path


def test_rows_in_the_package_format_and_gold_only_for_evaluation(folder):
    task = load_task(folder / "task.yaml")
    train = task.rows("train", with_gold=False)
    assert train[0] == {"id": "parity-train-0", "task": "parity", "question": "Is 10 even or odd?",
                        "prompt": [{"role": "user", "content": "Is 10 even or odd?"}],
                        "answer_options": ["even", "odd"],
                        "answer_instruction": "Answer with exactly one of even or odd, and end your response with "
                                              "\\boxed{even} or \\boxed{odd}."}
    assert all("gold" not in r and "parity" not in r for r in train)
    test = task.rows("test", with_gold=True)
    assert [r["gold"] for r in test[:2]] == ["even", "odd"]
    assert get_task("parity").metric == "accuracy"
    records = [{"prediction": "even", "gold": "even"}, {"prediction": "even", "gold": "odd"}]
    assert task_score("parity", records) == 0.5


def test_csv_and_a_conversational_prompt_column(tmp_path):
    (tmp_path / "train.csv").write_text("text,answer\nhello there,greeting\nbye now,farewell\n")
    (tmp_path / "t.yaml").write_text("name: greet\ndata: {train: train.csv}\nprompt_column: text\n"
                                     "system_prompt: Name the speech act.\ngold: answer\n")
    task = load_task(tmp_path / "t.yaml")
    assert task.task.metric == "exact_match" and task.task.free_text
    (row, _) = task.rows("train", with_gold=True)
    assert row["prompt"][0] == {"role": "system", "content": "Name the speech act."} and row["gold"] == "greeting"


@pytest.mark.parametrize("change, words", [
    (("metric: accuracy", "metric: f1"), "unknown metric 'f1'"),
    (("prompt: \"Is {number} even or odd?\"", "prompt: \"{number} is {parity}?\""), "shows the gold column"),
    (("gold: parity", "gold: parity\nlabel: x"), "unknown key 'label': did you mean 'labels'?"),
    (("labels: [even, odd]", "labels: [even]"), "two or more answer options"),
    (("metric: accuracy", "metric: exact_match"), "scores free text, but the task has labels"),
    (("labels: [even, odd]\n", ""), "metric accuracy needs `labels`"),
    (("data: {train: train.jsonl, test: test.jsonl}", "data: {train: train.txt}"), "not .json, .jsonl, .csv"),
    (("name: parity", "name: mosei"), "one of the package's tasks"),
])
def test_task_file_problems_are_one_line(folder, change, words):
    (folder / "task.yaml").write_text(SPEC.replace(*change))
    with pytest.raises(InputError, match=words.replace("?", r"\?").replace("[", r"\[")):
        load_task(folder / "task.yaml")


def test_row_problems_name_the_row(folder):
    task = load_task(folder / "task.yaml")
    (folder / "test.jsonl").write_text(json.dumps({"number": 3, "parity": "maybe"}) + "\n")
    with pytest.raises(InputError, match="row 0 has gold 'maybe', not one of the labels even, odd"):
        task.rows("test", with_gold=True)
    (folder / "test.jsonl").write_text(json.dumps({"n": 3, "parity": "odd"}) + "\n")
    with pytest.raises(InputError, match="row 0 has no column 'number' that the prompt template names"):
        task.rows("test", with_gold=True)
    (folder / "test.jsonl").write_text(json.dumps({"number": 3}) + "\n")
    with pytest.raises(InputError, match="row 0 has no gold column 'parity'"):
        task.rows("test", with_gold=True)
    (folder / "test.jsonl").write_text("")
    with pytest.raises(InputError, match=r"the test split test\.jsonl is empty"):
        task.rows("test", with_gold=True)
    with pytest.raises(InputError, match="has no 'validation' split"):
        task.rows("validation", with_gold=True)


def test_plain_rows_are_numbered_and_scored_without_id_or_task():
    rows = plain_rows([{"prompt": "2+2?", "gold": "4"}, {"prompt": "3+3?", "gold": "6"}], "mine.jsonl", judged=False)
    assert [r["id"] for r in rows] == [0, 1] and {r["task"] for r in rows} == {"rows"}
    assert rows[0]["prompt"] == [{"role": "user", "content": "2+2?"}] and TASKS["rows"].metric == "exact_match"
    assert task_score("rows", [{"prediction": " 4 ", "gold": "4"}, {"prediction": None, "gold": "6"}]) == 0.5
    labelled = plain_rows([{"prompt": "x", "gold": "a", "answer_options": ["a", "b"]}], "m.jsonl", judged=True)
    assert TASKS[labelled[0]["task"]].metric == "accuracy"


def test_the_paper_tasks_are_registered_with_their_metrics():
    assert {n: TASKS[n].metric for n in ("prefeval", "mosei", "urfunny", "intentqa")} == {
        "prefeval": "judge_accuracy", "mosei": "binary_weighted_f1", "urfunny": "weighted_f1",
        "intentqa": "judge_accuracy"}
    assert TASKS["mosei"].labels[0] == "highly negative" and TASKS["urfunny"].labels == ("humour", "not humour")


def test_a_paper_task_is_defined_in_one_place():
    """Issues 33 and 45: each paper task's name appears in one source file, its definition in data/tasks.py (the one
    table of tasks; HBA's rows, data/hba.py, look their task up there); every other wing reads the registry."""
    from pathlib import Path

    import rlce_trl

    root = Path(rlce_trl.__file__).parent
    for name in ("mosei", "urfunny", "intentqa"):
        files = sorted(str(p.relative_to(root)) for p in root.rglob("*.py") if name in p.read_text(encoding="utf-8"))
        assert files == ["data/tasks.py"], (name, files)


def test_the_video_tasks_titles_are_data_of_their_definitions():
    """The titles under which tables and plots show the video tasks ("MOSEI", "UR-FUNNY", "IntentQA") are string
    values in data/tasks.py only (with the paper's numbers there); elsewhere they may appear in docstrings, where they
    decide nothing."""
    import ast
    from pathlib import Path

    import rlce_trl

    def values(path: Path) -> set[str]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        return {title for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in docstrings for title in ("MOSEI", "UR-FUNNY", "IntentQA") if title in node.value}

    root = Path(rlce_trl.__file__).parent
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*.py") if values(p)) == ["data/tasks.py"]


def test_prefeval_is_named_in_two_source_files():
    """Issue 33: PrefEval's task name is written as a string in data/prefeval.py (where its rows come from: the rows'
    `task`, the `--dataset_name` that builds them) and data/tasks.py (its definition) only; every other wing asks the
    definition (its judge, its forms) or uses `data.prefeval.TASK`. Counted: string literals equal to the name (a
    docstring or message that mentions it is not a check), less the recipe's `script:` names (`SCRIPTS`, a script's
    name, not the task's)."""
    import ast
    from pathlib import Path

    import rlce_trl
    from rlce_trl.data.prefeval import TASK

    def literals(path: Path) -> int:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        script_names = {id(key) for node in ast.walk(tree) if isinstance(node, ast.Assign)
                        and any(isinstance(t, ast.Name) and t.id == "SCRIPTS" for t in node.targets)
                        and isinstance(node.value, ast.Dict) for key in node.value.keys}
        return sum(isinstance(node, ast.Constant) and node.value == TASK and id(node) not in script_names
                   for node in ast.walk(tree))

    root = Path(rlce_trl.__file__).parent
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*.py") if literals(p))
    assert files == ["data/prefeval.py", "data/tasks.py"], files


def test_the_wings_read_the_definitions():
    from rlce_trl.comparison import paper
    from rlce_trl.evaluation.evaluate import Judge
    from rlce_trl.methods.baseline_prompts import rubric_task_question

    assert TASKS["intentqa"].judge == "reference" and TASKS["prefeval"].judge == "prefeval_checks"
    assert judge_of("prefeval") == "prefeval_checks" and judge_of("no_such_task") is None
    assert TASKS["prefeval"].forms == ("explicit", "choice", "persona") and TASKS["mosei"].forms == ()
    question = TASKS["urfunny"].rubric_question
    assert rubric_task_question("Transcript: ...", TASKS["urfunny"].labels).startswith(question)
    assert rubric_task_question("Which is it?", ("a", "b"), "input").startswith("Which is it?")
    assert paper.TASKS["mosei"] == (TASKS["mosei"].paper.title, TASKS["mosei"].paper.metric)
    assert paper.TABLE1["rlce"]["intentqa"] == TASKS["intentqa"].paper.table1["rlce"]
    with pytest.raises(ValueError, match="No judge"):
        Judge(client=None)("numbered_evidence", [])


def test_the_hba_tasks_are_the_registrys_video_tasks():
    """Issue 45: one table of tasks. HBA's tasks are the registry's `media: video` entries; an HBA row takes its
    options from its task there, `--hba_task` offers exactly those tasks, and `--task` given a built-in task's name
    (not a file) names how that task is read instead."""
    import argparse

    from rlce_trl.cli import evaluate, sample
    from rlce_trl.data import hba
    from rlce_trl.data.tasks import video_tasks

    assert video_tasks() == ("mosei", "urfunny", "intentqa") and not hasattr(hba, "HBA_TASKS")
    problem = "<video>\nTranscript: fine\nWhat is the sentiment?"
    for name in video_tasks():
        row = hba.build_hba_row({"problem": problem, "answer": "x", "videos": ["a.mp4"]}, name, 0)
        assert row["task"] == name and row["answer_options"] == list(get_task(name).labels or ())
    for module in (evaluate, sample):
        parser = argparse.ArgumentParser()
        module.add_arguments(parser)
        action = next(a for a in parser._actions if a.dest == "hba_task")
        assert action.choices == sorted(video_tasks())
    with pytest.raises(InputError, match="Unknown HBA task 'prefeval'; choose one of mosei, urfunny, intentqa"):
        hba.build_hba_row({"problem": problem, "answer": "x", "videos": ["a.mp4"]}, "prefeval", 0)
    with pytest.raises(InputError, match="mosei is a built-in task: its recipes train on it, --data with --hba_task "
                       "mosei reads its split"):
        load_task("mosei")
    with pytest.raises(InputError, match=r"no such file: give a task file \(YAML; see the README's \"Your own "
                       r"task\"\)\.$"):
        load_task("no_such_task.yaml")
