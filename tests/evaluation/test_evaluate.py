import json
import re
from pathlib import Path

import pytest
from testing_utils import build_corpus_model

from rlce_trl.data import PREFEVAL_FORMS, load_preference_sample, write_jsonl
from rlce_trl.data.hba import URFUNNY_LABELS
from rlce_trl.evaluation.evaluate import Judge, evaluate_prefeval_forms, evaluate_rows
from rlce_trl.evaluation.judges import OpenAIJudgeClient, load_prefeval_judge_prompts
from rlce_trl.evaluation.metrics import weighted_f1


def urfunny_rows(n=6):
    return [
        {
            "id": f"u{i}",
            "task": "urfunny",
            "answer_options": list(URFUNNY_LABELS),
            "prompt": [{"role": "user", "content": f"clip {i}: funny?"}],
            "gold": URFUNNY_LABELS[i % 2],
        }
        for i in range(n)
    ]


def scripted(answers):
    """A generator that answers row i of each call from `answers` by the digits in its prompt."""
    calls = []

    def generate(prompts):
        calls.append(len(prompts))
        return [answers[int(re.search(r"(\d+)", p[-1]["content"]).group(1))] for p in prompts]

    generate.calls = calls
    return generate


def read(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_closed_label_scoring_and_files(tmp_path):
    answers = ["\\boxed{humour}", "not humour", "\\boxed{funny}", "humour", "no idea", "\\boxed{not humour}"]
    summary = evaluate_rows(urfunny_rows(), scripted(answers), tmp_path, batch_size=4, progress=False)
    predictions = [r["prediction"] for r in read(tmp_path / "predictions.jsonl")]
    assert predictions == ["humour", "not humour", None, "humour", None, "not humour"]
    expected = weighted_f1(predictions, [r["gold"] for r in urfunny_rows()], URFUNNY_LABELS)
    assert summary["score"] == pytest.approx(expected) and summary["complete"]
    assert summary["no_valid_answer"] == 2 and summary["metric"] == "weighted_f1"
    assert json.loads((tmp_path / "summary.json").read_text()) == summary


def test_interrupted_run_resumes(tmp_path):
    answers = ["\\boxed{humour}"] * 6

    def crashing(prompts):
        if crashing.n:
            raise KeyboardInterrupt
        crashing.n += 1
        return ["\\boxed{humour}"] * len(prompts)

    crashing.n = 0
    with pytest.raises(KeyboardInterrupt):
        evaluate_rows(urfunny_rows(), crashing, tmp_path, batch_size=4, progress=False)
    assert len(read(tmp_path / "predictions.jsonl")) == 4
    partial = json.loads((tmp_path / "summary.json").read_text())
    assert partial["num_done"] == 4 and not partial["complete"]
    # a line cut in the middle of a write is ignored and its row redone
    with (tmp_path / "predictions.jsonl").open("a") as f:
        f.write('{"id": "u4", "pred')
    generate = scripted(answers)
    summary = evaluate_rows(urfunny_rows(), generate, tmp_path, batch_size=4, progress=False)
    assert generate.calls == [2] and summary["complete"] and summary["num_done"] == 6


def test_gold_is_required(tmp_path):
    rows = load_preference_sample("train")[:2]
    with pytest.raises(ValueError, match="validation or test split"):
        evaluate_rows(rows, scripted([]), tmp_path, progress=False)


def test_free_text_without_judge_has_no_score(tmp_path):
    rows = load_preference_sample("test")[:2]
    summary = evaluate_rows(rows, lambda ps: ["Try the lentil soup."] * len(ps), tmp_path, progress=False)
    assert summary["score"] is None and summary["unjudged"] == 2 and "judge" in summary["note"]


def _judge_all_good(prompt, index):
    if "CHECK=acknowledge" in prompt:
        return "<preference>Since you told me</preference><answer>Yes</answer>"
    if "CHECK=helpful" in prompt:
        return "<explanation>x</explanation><answer>Yes</answer>"
    # violation: the response "bad" violates; hallucination: never
    return "<answer>Yes</answer>" if "CHECK=violation" in prompt and "R: bad" in prompt else "<answer>No</answer>"


def test_prefeval_forms_macro(tmp_path, fake_judge, stand_in_prefeval):
    data = tmp_path / "data"
    base = load_preference_sample("test")[:3]
    for form in PREFEVAL_FORMS:
        write_jsonl([{**r, "form": form, "id": f"{form}/{r['id']}"} for r in base], data / form / "test.jsonl")
    server = fake_judge(_judge_all_good)
    judge = Judge(
        OpenAIJudgeClient(server.base_url, "j", concurrency=2), load_prefeval_judge_prompts(stand_in_prefeval)
    )
    # explicit: all good; choice: one bad of three; persona: all bad
    replies = {"explicit": ["good"] * 3, "choice": ["good", "bad", "good"], "persona": ["bad"] * 3}

    calls = iter(PREFEVAL_FORMS)

    def per_form(prompts):
        form = next(calls)
        return replies[form][: len(prompts)]

    summary = evaluate_prefeval_forms(
        data, "test", per_form, tmp_path / "out", judge=judge, batch_size=8, progress=False
    )
    scores = {form: s["score"] for form, s in summary["forms"].items()}
    assert scores == pytest.approx({"explicit": 1.0, "choice": 2 / 3, "persona": 0.0})
    assert summary["prefeval_macro"] == pytest.approx((1 + 2 / 3) / 3) and summary["complete"]
    assert summary["forms"]["persona"]["error_preference_unaware_violation"] == 0.0
    assert summary["forms"]["persona"]["error_inconsistent"] == 1.0
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["prefeval_macro"] == summary["prefeval_macro"]


def test_cli_with_tiny_model_and_judge(tmp_path, fake_judge, stand_in_prefeval, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import rlce_trl.generation.generators as generation_module
    from rlce_trl.cli import main

    monkeypatch.setattr(generation_module, "vllm_available", lambda: False)
    rows = load_preference_sample("test")
    corpus = [m["content"] for r in rows for m in r["prompt"]]
    model = build_corpus_model(tmp_path / "tiny", corpus)
    server = fake_judge(_judge_all_good)
    args = [
        "evaluate",
        "--model_name_or_path",
        str(model),
        "--data",
        "sample",
        "--output_dir",
        str(tmp_path / "out"),
        "--max_new_tokens",
        "6",
        "--batch_size",
        "2",
        "--limit",
        "4",
        "--no_progress",
        "--judge_base_url",
        server.base_url,
        "--judge_model",
        "j",
        "--prefeval_dir",
        str(stand_in_prefeval),
    ]
    assert main(args) == 0
    records = read(tmp_path / "out" / "predictions.jsonl")
    assert len(records) == 4 and all(isinstance(r["response"], str) for r in records)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["complete"] and summary["num_rows"] == 4 and summary["score"] is not None
    # greedy: the same command again generates nothing new and changes nothing
    assert main(args) == 0
    assert read(tmp_path / "out" / "predictions.jsonl") == records
