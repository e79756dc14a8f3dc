"""Test-time adaptation (paper §4.2, appendix B.3): the adaptation rows never carry gold (checked when the dataset is
built), one pass over the sample's test split for RLCE and for TTRL with the evaluation at the end of the pass on the
same split with gold, the model card naming the split, and `rlce-trl analyze ttt` putting the runs side by side.

The LLM judge of free-text rows cannot run here: `FakeJudge` (a FAKE) marks a response correct when it shares a word
of 5+ letters with the row's question."""

import json
import re
import sys

import pytest
from helpers import CONFIGS, TINY, load_example

from rlce_trl.cli import main as cli_main
from rlce_trl.data.checks import adaptation_rows, check_no_gold


class FakeJudge:
    """A FAKE free-text judge: `correct` when the response shares a 5+ letter word with the question."""

    def __init__(self):
        self.calls = 0

    def __call__(self, task, records):
        self.calls += 1
        words = lambda text: set(re.findall(r"[a-z]{5,}", (text or "").lower()))  # noqa: E731
        return [{"correct": bool(words(r["response"]) & words(r["question"]))} for r in records]


def test_gold_guard_names_the_column():
    rows = [{"id": "a", "prompt": [], "gold": "x"}, {"id": "b", "prompt": [], "answer": "y"}]
    with pytest.raises(ValueError, match="'gold'"):
        check_no_gold(rows)
    with pytest.raises(ValueError, match="'answer'"):
        check_no_gold(rows[1:])
    stripped = adaptation_rows(rows)
    check_no_gold(stripped)
    assert rows[0]["gold"] == "x" and "gold" not in stripped[0]  # the evaluation copy keeps its gold


def test_training_rows_with_gold_fail_when_the_dataset_is_built(tmp_path, monkeypatch):
    from rlce_trl.data import load_preference_sample, write_jsonl

    folder = tmp_path / "data"
    leaky = load_preference_sample("test")[:4]  # rows with `gold`, written as a train split by mistake
    write_jsonl(leaky, folder / "explicit" / "train.jsonl")
    write_jsonl(leaky, folder / "explicit" / "validation.jsonl")
    script = load_example("train_prefeval")
    argv = ["--config", str(CONFIGS / "quickstart.yaml"), "--dataset_name", str(folder), "--prefeval_form", "explicit",
            "--output_dir", str(tmp_path / "o"), "--model_name_or_path", "unused"]
    args = script.make_parser().parse_args_and_config(argv)
    monkeypatch.setattr("rlce_trl.training.pipeline.filter_long_prompts", lambda rows, *a, **k: rows)
    monkeypatch.setattr("rlce_trl.training.pipeline.check_model_source", lambda *a, **k: None)  # no model is loaded
    with pytest.raises(ValueError, match="column 'gold'"):
        script.main(*args)


def run_tta(model, out, method, monkeypatch, *extra):
    judge = FakeJudge()
    monkeypatch.setattr("rlce_trl.training.pipeline.make_judge", lambda *a, **k: judge)
    argv = ["--config", str(CONFIGS / "quickstart.yaml"), "--model_name_or_path", model, "--output_dir", str(out),
            "--tta_split", "test", "--num_train_epochs", "1", "--max_steps", "-1", "--save_strategy", "no",
            "--reward_method", method, "--judge_base_url", "http://127.0.0.1:9/v1", "--judge_model", "fake",
            "--validation_max_new_tokens", "16", *extra]
    monkeypatch.setattr(sys, "argv", ["train_prefeval.py", *argv])
    script = load_example("train_prefeval")
    trainer = script.main(*script.make_parser().parse_args_and_config(argv))
    return trainer, judge


def check_run(trainer, judge, out):
    record = json.loads((out / "tta" / "passes.json").read_text())
    assert [p["pass"] for p in record["passes"]] == [0, 1]  # the base model, then the end of the pass
    assert record["passes"][1]["step"] == trainer.state.global_step > 0
    for index in (0, 1):
        summary = json.loads((out / "tta" / f"pass-{index}" / "summary.json").read_text())
        assert summary["complete"] and summary["num_rows"] == 8 and summary["score"] is not None
    assert judge.calls >= 2
    assert all("gold" not in row for row in trainer.train_dataset)  # adapted on the test rows without their gold
    assert len(trainer.train_dataset) == 8
    card = (out / "README.md").read_text()
    assert "test-time adaptation on the unlabelled `test` split" in card
    return record


@pytest.mark.slow  # ~1-2 min on 2 shared cores: two runs with evaluations
def test_tta_one_pass_rlce_and_ttrl_tiny_then_side_by_side(tiny_model_dir, tmp_path, monkeypatch, capsys):
    tiny = [*TINY[:-2], "--per_device_train_batch_size", "8"]
    records = {}
    for method in ("rlce", "ttrl"):
        out = tmp_path / f"tta_{method}"
        trainer, judge = run_tta(tiny_model_dir, out, method, monkeypatch, *tiny)
        records[method] = check_run(trainer, judge, out)
    assert records["rlce"]["method"] == "RLCE (G=4)" and records["ttrl"]["method"] == "TTRL (G=4)"
    capsys.readouterr()
    assert cli_main(["analyze", "ttt", str(tmp_path / "tta_rlce"), str(tmp_path / "tta_ttrl")]) == 0
    table = capsys.readouterr().out
    assert "| run | method | task | base | pass 1 | delta |" in table
    assert "RLCE (G=4)" in table and "TTRL (G=4)" in table
    assert cli_main(["analyze", "ttt", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: No tta/passes.json under") and err.count("\n") == 1


@pytest.mark.slow
def test_tta_one_pass_smollm2_rlce_and_ttrl(tmp_path, monkeypatch):
    from rlce_trl.models import smollm2_instruct

    model = smollm2_instruct()
    for method in ("rlce", "ttrl"):
        out = tmp_path / f"tta_{method}"
        # the 8 test prompts in one step (G=4): one generation batch of 32 and one batched verifier call per stage for
        # the whole pass; the loss in 4 micro-batches of 8 (one batch of 32 SmolLM2 logits took ~21 GiB of memory)
        trainer, judge = run_tta(model, out, method, monkeypatch, "--per_device_train_batch_size", "8",
                                 "--gradient_accumulation_steps", "4")
        check_run(trainer, judge, out)


TTA = {f"tta_{task}_{method}_g{G}": (task, method, G, passes)
       for task, passes in (("prefeval", 3), ("intentqa", 3), ("urfunny", 3), ("mosei", 2))
       for method, G in (("rlce", 4), ("ttrl", 4), ("ttrl", 16))}


@pytest.mark.parametrize("name", sorted(TTA))
def test_tta_recipe_is_its_training_recipe_in_test_time_mode(name):
    import yaml

    task, method, G, passes = TTA[name]
    tta = yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())
    base = yaml.safe_load((CONFIGS / f"{task}_rlce.yaml").read_text())
    assert (tta["tta_split"], tta["num_train_epochs"], tta["max_steps"], tta["num_generations"]) == ("test", passes,
                                                                                                     -1, G)
    assert tta.get("reward_method", "rlce") == method and tta["tta_eval_base"] is True
    # G=16 keeps the prompts per cycle and per optimizer step
    assert tta["generation_batch_size"] // G == base["generation_batch_size"] // 4
    assert tta["gradient_accumulation_steps"] * 4 // G == base["gradient_accumulation_steps"]
    changed = {"tta_split", "tta_eval_base", "num_train_epochs", "max_steps", "num_generations", "reward_method",
               "generation_batch_size", "gradient_accumulation_steps", "save_strategy", "save_steps", "output_dir"}
    assert {k: v for k, v in tta.items() if k not in changed} == {k: v for k, v in base.items() if k not in changed}


@pytest.mark.slow  # ~20 s: a tiny model, one pass over 4 rows, two evaluations
def test_tta_hba_text_only_closed_labels_score_without_a_judge(tiny_model_dir, tmp_path, monkeypatch):
    """train_hba with `tta_split`: the HBA split is adapted on without `gold` and scored with MOSEI's F1 per pass."""
    rows = [{"problem": f"<video>\n<audio>\nthe user said the food {w}. What is the sentiment?", "answer": label,
             "videos": [f"clip{i}.mp4"]} for i, (w, label) in enumerate([("yes", "positive"), ("no", "negative")] * 2)]
    split = tmp_path / "test.jsonl"
    split.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "tta_mosei"
    argv = ["--config", str(CONFIGS / "tta_mosei_rlce_g4.yaml"), "--model_name_or_path", tiny_model_dir,
            "--output_dir", str(out), "--train_file", str(split), "--text_only", "true", "--num_train_epochs", "1",
            "--save_strategy", "no", "--use_vllm", "false", "--use_cpu", "true", "--bf16", "false",
            "--verifier_mode", "transformers", "--generation_batch_size", "4", "--per_device_train_batch_size", "4",
            "--gradient_accumulation_steps", "1", "--report_to", "none", "--beta", "0.0",
            "--validation_max_new_tokens", "8", *TINY[:-2]]
    monkeypatch.setattr(sys, "argv", ["train_hba.py", *argv])
    script = load_example("train_hba")
    trainer = script.main(*script.make_parser().parse_args_and_config(argv))
    assert all("gold" not in row for row in trainer.train_dataset) and len(trainer.train_dataset) == 4
    record = json.loads((out / "tta" / "passes.json").read_text())
    assert [p["pass"] for p in record["passes"]] == [0, 1] and record["task"] == "mosei"
    assert all(p["score"] is not None and p["metric"] for p in record["passes"])  # closed labels: no judge needed
    assert "test-time adaptation on the unlabelled `test` split (1 pass," in (out / "README.md").read_text()


def test_validation_limit_takes_the_first_rows_of_the_split_for_adaptation_and_evaluation(tmp_path, monkeypatch):
    seen = {}

    def capture(script_args, training_args, model_args, train_dataset, callbacks, dataset, **run):
        seen["train"], seen["eval"] = list(train_dataset), callbacks[0].rows

    monkeypatch.setattr("rlce_trl.training.pipeline.train_rlce", capture)
    monkeypatch.setattr("rlce_trl.training.pipeline.filter_long_prompts", lambda rows, *a, **k: rows)
    monkeypatch.setattr("rlce_trl.training.pipeline.check_model_source", lambda *a, **k: None)  # no model is loaded
    script = load_example("train_prefeval")
    argv = ["--config", str(CONFIGS / "quickstart.yaml"), "--model_name_or_path", "unused", "--output_dir",
            str(tmp_path / "o"), "--tta_split", "test", "--validation_limit", "3"]
    script.main(*script.make_parser().parse_args_and_config(argv))
    assert len(seen["train"]) == len(seen["eval"]) == 3
    assert [r["id"] for r in seen["train"]] == [r["id"] for r in seen["eval"]]
    assert all("gold" not in r for r in seen["train"]) and all("gold" in r for r in seen["eval"])
