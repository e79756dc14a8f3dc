"""`evaluate` under hostile conditions (issue 13): cut and corrupted append-only files, a judge that is down, two runs
on one folder, credentials in the judge URL. Generation is scripted (no model); judges are FAKE servers."""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path

import pytest
from test_evaluate import _judge_all_good, read, scripted, urfunny_rows  # noqa: E402

from rlce_trl.data import load_preference_sample
from rlce_trl.errors import InputError
from rlce_trl.evaluation.evaluate import Judge, OutputLock, evaluate_rows
from rlce_trl.evaluation.judges import OpenAIJudgeClient, load_prefeval_judge_prompts


def test_a_cut_last_line_is_repaired_before_appending_and_the_summary_matches_the_file(tmp_path):
    evaluate_rows(urfunny_rows(), scripted(["\\boxed{humour}"] * 6), tmp_path, batch_size=3, progress=False)
    path = tmp_path / "predictions.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:4]) + "\n" + lines[4][:17])  # killed in the middle of writing row 5
    generate = scripted(["\\boxed{humour}"] * 6)
    summary = evaluate_rows(urfunny_rows(), generate, tmp_path, batch_size=3, progress=False)
    records = read(path)  # every line parses: nothing was glued onto the fragment
    assert generate.calls == [2] and len(records) == 6 and len({r["id"] for r in records}) == 6
    assert summary["num_done"] == 6 and summary["complete"] and summary["repaired_lines"] == 1


def test_a_corrupted_line_in_the_middle_is_refused_with_the_fix(tmp_path):
    evaluate_rows(urfunny_rows(), scripted(["\\boxed{humour}"] * 6), tmp_path, batch_size=3, progress=False)
    path = tmp_path / "predictions.jsonl"
    lines = path.read_text().splitlines()
    lines[2] = "garbage{"
    path.write_text("\n".join(lines) + "\n")
    before = path.read_text()
    with pytest.raises(InputError, match=r"line 3 is not valid JSON.*delete .*predictions.jsonl"):
        evaluate_rows(urfunny_rows(), scripted([]), tmp_path, progress=False)
    assert path.read_text() == before  # nothing appended


def _down_then_up(tmp_path, fake_judge, stand_in_prefeval):
    rows = load_preference_sample("test")[:3]
    prompts = load_prefeval_judge_prompts(stand_in_prefeval)
    down = Judge(OpenAIJudgeClient("http://user:hunter2secret@127.0.0.1:9/v1", "j", max_retries=0), prompts)
    first = evaluate_rows(rows, lambda ps: ["good"] * len(ps), tmp_path, judge=down, progress=False)
    return rows, prompts, first


def test_a_judge_that_is_down_gives_no_verdict_and_the_rerun_judges_again(tmp_path, fake_judge, stand_in_prefeval):
    rows, prompts, first = _down_then_up(tmp_path, fake_judge, stand_in_prefeval)
    records = read(tmp_path / "predictions.jsonl")
    assert all(r["judge_failed"] and r["correct"] is None for r in records)
    assert not first["complete"] and first["judge_failed"] == 3 and first["score"] is None
    text = (tmp_path / "predictions.jsonl").read_text()
    assert "127.0.0.1:9" in text and "hunter2secret" not in text  # the error is kept, the password is not
    server = fake_judge(_judge_all_good)
    up = Judge(OpenAIJudgeClient(server.base_url, "j"), prompts)

    def never(prompts):  # responses are kept: only the judging is redone
        raise AssertionError("regenerated a row that only needed judging")

    second = evaluate_rows(rows, never, tmp_path, judge=up, progress=False)
    assert second["complete"] and second["judge_failed"] == 0 and second["score"] == 1.0
    assert second["num_done"] == 3
    third = evaluate_rows(rows, never, tmp_path, judge=up, progress=False)  # nothing left to do
    assert third == second and len(server.requests) == 3 * 4  # 3 rows x (3 checks + hallucination)


def _hold_lock(folder: str, ready, release):
    with OutputLock(Path(folder)):
        ready.set()
        release.wait(20)


def test_a_second_run_on_the_same_folder_is_refused(tmp_path):
    context = multiprocessing.get_context("fork")
    ready, release = context.Event(), context.Event()
    holder = context.Process(target=_hold_lock, args=(str(tmp_path), ready, release))
    holder.start()
    try:
        assert ready.wait(20)
        with pytest.raises(InputError, match=r"being written by another `rlce-trl evaluate` \(pid \d+\)"):
            evaluate_rows(urfunny_rows(), scripted(["\\boxed{humour}"] * 6), tmp_path, progress=False)
        assert not (tmp_path / "predictions.jsonl").exists()
    finally:
        release.set()
        holder.join(20)
    start = time.monotonic()
    evaluate_rows(urfunny_rows(), scripted(["\\boxed{humour}"] * 6), tmp_path, progress=False)  # free again
    assert time.monotonic() - start < 10 and len(read(tmp_path / "predictions.jsonl")) == 6


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda rows: rows[1].pop("prompt"), "row 1: no `prompt` field"),
        (lambda rows: rows[2].pop("id"), "row 2: no `id` field"),
        (lambda rows: rows[0].pop("task"), "row 0: no `task` field"),
        (lambda rows: rows[0].update(answer_options="ab"), "row 0: `answer_options` is a str"),
        (lambda rows: [r.update(task="chess") for r in rows], "unknown task 'chess'"),
        (lambda rows: rows[3].update(id=rows[0]["id"]), "duplicate"),
        (lambda rows: rows.clear(), "holds no rows"),
    ],
)
def test_bad_rows_fail_before_anything_is_written(tmp_path, mutate, match):
    rows = urfunny_rows()
    mutate(rows)
    with pytest.raises(InputError, match=match):
        evaluate_rows(rows, scripted([]), tmp_path / "out", progress=False)
    assert not (tmp_path / "out" / "predictions.jsonl").exists()


def test_batch_size_zero_and_an_output_that_is_a_file(tmp_path):
    with pytest.raises(InputError, match="batch_size=0"):
        evaluate_rows(urfunny_rows(), scripted([]), tmp_path, batch_size=0, progress=False)
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="is a file"):
        evaluate_rows(urfunny_rows(), scripted([]), tmp_path / "file", progress=False)


def test_predictions_hold_no_credentials_even_in_judge_replies(tmp_path, fake_judge, stand_in_prefeval, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-judge-key-0123456789")
    server = fake_judge(lambda prompt, i: "<answer>Yes</answer> your key is sk-the-judge-key-0123456789")
    judge = Judge(OpenAIJudgeClient(server.base_url, "j"), load_prefeval_judge_prompts(stand_in_prefeval))
    evaluate_rows(load_preference_sample("test")[:1], lambda ps: ["good"], tmp_path, judge=judge, progress=False)
    assert server.headers[0]["Authorization"] == "Bearer sk-the-judge-key-0123456789"
    assert "sk-the-judge-key" not in (tmp_path / "predictions.jsonl").read_text()
    assert json.loads((tmp_path / "summary.json").read_text())["complete"]


def test_a_partly_failed_judge_scores_only_the_judged_rows():
    from rlce_trl.evaluation.evaluate import summarize

    rows = [{"id": k, "task": "intentqa", "prompt": "q", "gold": "g"} for k in range(4)]
    records = [{"id": 0, "prediction": "a", "correct": True}, {"id": 1, "prediction": "a", "correct": False},
               {"id": 2, "prediction": "a", "correct": None, "judge_failed": True},
               {"id": 3, "prediction": "a", "correct": None, "judge_failed": True}]
    summary = summarize("intentqa", rows, records)
    assert summary["score"] == 0.5 and summary["judge_failed"] == 2 and not summary["complete"]
    assert summary["num_done"] == 4 and "rerun" in summary["note"]


def test_hba_rows_of_another_task_or_without_placeholders_are_named(tmp_path, capsys):
    from rlce_trl.cli import main

    data = tmp_path / "rows.jsonl"
    for records, needle in [
        ([{"id": "p/0", "task": "prefeval", "prompt": "hi", "gold": "x"}], "has no problem / answer"),
        ([{"problem": "How does the speaker feel?", "videos": ["a.mp4"], "answer": "positive"}],
         "0 <video> placeholders in `problem` but 1 `videos`"),
    ]:
        data.write_text("".join(json.dumps(r) + "\n" for r in records))
        code = main(["evaluate", "--model_name_or_path", str(tmp_path), "--hba_task", "mosei", "--data", str(data),
                     "--output_dir", str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("error: HBA row") and err.count("\n") == 1 and needle in err


def test_a_text_only_checkpoint_for_clips_is_refused_before_its_weights_load(tiny_model_dir):
    from rlce_trl.generation.hf import check_vision_language

    with pytest.raises(InputError, match=r"is a text-only checkpoint \(\w+\).*vision-language checkpoint"):
        check_vision_language(str(tiny_model_dir))
