"""Issue 42: `rlce-trl check` (the preflight) says whether a run would learn, and the policy is prompted the same way
in training, evaluation, sampling, selection and the preflight.

- a tiny random policy that never writes the answer format: exit 1, the cause and what to change, the run's own
  output folder untouched; a task with signal (two boxed labels the tiny vocabulary holds): exit 0;
- the worked example's closed labels: one prompt (the task's answer instruction naming its labels, in place of the
  recipe's suffix) in the rows TRL trained on, in `evaluate`'s predictions (messages and rendered text), in
  `sample`'s pool, in the preflight's rendered prompt, and checked by `select --task`.
"""

import json
import sys

import pytest
from helpers import ROOT, TINY
from testing_utils import WORDS, build_tiny_model

from rlce_trl.cli import main

EXAMPLE = ROOT / "examples" / "own_task"
INSTRUCTION = "Answer with exactly one of even or odd, and end your response with \\boxed{even} or \\boxed{odd}."


@pytest.fixture(scope="module")
def no_format_model(tmp_path_factory) -> str:
    """A tiny random policy whose vocabulary holds no `\\boxed{...}` word: it can never write an answer."""
    return build_tiny_model(tmp_path_factory.mktemp("noformat") / "model",
                            words=[w for w in WORDS if "boxed" not in w])


@pytest.fixture
def parity(tmp_path):
    """The worked example with its train rows also as the test split (so every command sees the same rows)."""
    rows = (EXAMPLE / "train.jsonl").read_text().splitlines()[:8]
    (tmp_path / "rows.jsonl").write_text("\n".join(rows) + "\n")
    spec = (EXAMPLE / "parity.yaml").read_text().replace("validation: validation.jsonl", "validation: rows.jsonl")
    spec = spec.replace("train: train.jsonl", "train: rows.jsonl").replace("test: test.jsonl", "test: rows.jsonl")
    (tmp_path / "parity.yaml").write_text(spec)
    return tmp_path / "parity.yaml", [json.loads(r) for r in rows]


def _expected(record: dict) -> list[dict]:
    return [{"role": "user", "content": f"Is the number {record['number']} even or odd? {INSTRUCTION}"}]


def test_check_without_signal_exits_1_with_the_cause_and_the_fix(no_format_model, parity, tmp_path, capsys):
    task, _ = parity
    out = tmp_path / "run"
    code = main(["check", "--task", str(task), "--config", "quickstart", "--model_name_or_path", no_format_model,
                 "--output_dir", str(out), "--check_rows", "2", *TINY])
    captured = capsys.readouterr()
    assert code == 1
    assert "answer rate:              0/8 rollouts hold an answer" in captured.out
    assert "distinct answers/group:   0, 0" in captured.out and "one checkpoint on disk:" in captured.out
    assert "change: the model does not write \\boxed{...} even so" in captured.out
    assert captured.err.strip().splitlines()[-1].startswith("error: no learning signal: no completion held an answer")
    assert not out.exists()  # the preflight writes nothing into the run's folder


def test_check_with_signal_exits_0(tiny_model_dir, tmp_path, capsys):
    """Two labels the tiny vocabulary holds as boxed words: groups split; TTRL's majority rewards differ."""
    rows = [{"text": f"the user said the food {'yes' if k % 2 else 'no'} likes",
             "label": "positive" if k % 2 else "negative"} for k in range(4)]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "food.yaml").write_text("name: food\ndata: {train: rows.jsonl}\nprompt: '{text}'\n"
                                        "labels: [positive, negative]\ngold: label\n")
    code = main(["check", "--task", str(tmp_path / "food.yaml"), "--config", "quickstart", "--model_name_or_path",
                 tiny_model_dir, "--reward_method", "ttrl", "--num_generations", "8", *TINY,
                 "--per_device_train_batch_size", "8"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "\nlearning signal: answered" in out and "rewards differ in:        0%" not in out


def test_one_prompt_in_train_evaluate_sample_select_and_check(tiny_model_dir, parity, tmp_path, monkeypatch, capsys):
    from transformers import AutoTokenizer

    task, records = parity
    expected = {r["number"]: _expected(r) for r in records}
    run = tmp_path / "run"
    monkeypatch.setattr(sys, "argv", ["rlce-trl", "train"])
    assert main(["train", "--task", str(task), "--config", "quickstart", "--model_name_or_path", tiny_model_dir,
                 "--output_dir", str(run), "--max_steps", "1", "--save_strategy", "no", *TINY]) == 0
    import pandas

    trained = [list(p) for p in pandas.read_parquet(next((run / "completions").glob("*.parquet")))["prompt"]]
    assert trained and all([dict(m) for m in p] in expected.values() for p in trained)  # what TRL trained on
    recorded = json.loads((run / "rlce_prompting.json").read_text())
    assert recorded["prompt_suffix"].startswith("Answer in one short sentence") and recorded["reward_method"] == "rlce"

    capsys.readouterr()
    assert main(["evaluate", "--task", str(task), "--model_name_or_path", str(run), "--output_dir",
                 str(tmp_path / "eval"), "--backend", "transformers", "--max_new_tokens", "4", "--limit", "3",
                 "--no_progress"]) == 0
    assert "prompting as in training" in capsys.readouterr().err
    tokenizer = AutoTokenizer.from_pretrained(run)
    predictions = [json.loads(line) for line in (tmp_path / "eval" / "predictions.jsonl").read_text().splitlines()]
    for record, prediction in zip(records, predictions, strict=False):
        assert prediction["prompt"] == expected[record["number"]]
        assert prediction["prompt_text"] == tokenizer.apply_chat_template(
            expected[record["number"]], tokenize=False, add_generation_prompt=True)

    assert main(["sample", "--task", str(task), "--model_name_or_path", str(run), "--output_dir",
                 str(tmp_path / "pool"), "--n", "1", "--limit", "2", "--max_new_tokens", "4", "--style", "boxed",
                 "--diversify", "off"]) == 0
    pooled = [json.loads(line) for line in (tmp_path / "pool" / "pool.jsonl").read_text().splitlines()]
    assert [p["prompt"] for p in pooled] == [expected[r["number"]] for r in records[:2]]
    assert "sampled 1/2 rows" in capsys.readouterr().err  # progress row by row
    assert main(["select", "--pool", str(tmp_path / "pool"), "--output_dir", str(tmp_path / "sel"), "--task",
                 str(task), "--selectors", "majority"]) == 0
    line = json.loads((tmp_path / "pool" / "pool.jsonl").read_text().splitlines()[0])
    line["prompt"][0]["content"] = line["prompt"][0]["content"].replace(INSTRUCTION, "")  # not the training prompt
    (tmp_path / "other.jsonl").write_text(json.dumps(line) + "\n")
    capsys.readouterr()
    assert main(["select", "--pool", str(tmp_path / "other.jsonl"), "--output_dir", str(tmp_path / "sel2"), "--task",
                 str(task), "--selectors", "majority"]) == 2
    assert "was sampled with another prompt than the task's training prompt" in capsys.readouterr().err

    assert main(["check", "--task", str(task), "--config", "quickstart", "--model_name_or_path", tiny_model_dir,
                 "--check_rows", "1", *TINY]) in (0, 1)
    shown = capsys.readouterr().out.split("exactly as the policy sees it in training:\n", 1)[1].split("\n\n")[0]
    ids = tokenizer.apply_chat_template(expected[records[0]["number"]], add_generation_prompt=True, tokenize=True)
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    assert shown == "  " + tokenizer.decode(ids).replace("\n", "\n  ")


def test_the_instruction_takes_the_suffix_place_and_free_text_keeps_the_suffix(tmp_path):
    from rlce_trl.data.prompts import Prompting, find_prompting, save_prompting
    from rlce_trl.data.tasks import load_task
    from rlce_trl.errors import InputError
    from rlce_trl.training.pipeline import policy_rows

    (tmp_path / "rows.jsonl").write_text('{"q": "Where is my parcel?", "label": "shipping"}\n')
    labelled = "name: route\ndata: {train: rows.jsonl}\nprompt: '{q}'\nlabels: [billing, shipping]\ngold: label\n"
    (tmp_path / "route.yaml").write_text(labelled)
    (tmp_path / "free.yaml").write_text("name: route_free\ndata: {train: rows.jsonl}\nprompt: '{q}'\ngold: label\n")
    (tmp_path / "own.yaml").write_text(labelled.replace("route", "route_own") + "answer_instruction: Pick {labels}.\n")
    suffix = Prompting(prompt_suffix="End with \\boxed{}.")
    content = {name: policy_rows(load_task(tmp_path / f"{name}.yaml").rows("train", with_gold=False), suffix)[0]
               ["prompt"][-1]["content"] for name in ("route", "free", "own")}
    assert content == {
        "route": "Where is my parcel? Answer with exactly one of billing or shipping, and end your response with "
                 "\\boxed{billing} or \\boxed{shipping}.",
        "free": "Where is my parcel? End with \\boxed{}.",
        "own": "Where is my parcel? Pick billing or shipping."}
    (tmp_path / "bad.yaml").write_text(labelled.replace("route", "route_bad") + "answer_instruction: [x]\n")
    with pytest.raises(InputError, match="bad.yaml: `answer_instruction` must be auto, none or the"):
        load_task(tmp_path / "bad.yaml")
    save_prompting(suffix, tmp_path / "run")
    (tmp_path / "run" / "checkpoint-2").mkdir()
    assert find_prompting(tmp_path / "run" / "checkpoint-2")[0] == suffix  # a checkpoint reads its run's record
    assert find_prompting(tmp_path / "nowhere") is None


def test_the_preflight_in_python_on_a_trainer(no_format_model, tmp_path):
    """`sample_step` on an `RLCEGRPOTrainer` built in Python: the same verdict, nothing trained."""
    from datasets import Dataset
    from testing_utils import preference_rows, tiny_grpo_args

    from rlce_trl import RLCEGRPOTrainer
    from rlce_trl.training.preflight import sample_step

    trainer = RLCEGRPOTrainer(model=no_format_model, args=tiny_grpo_args(tmp_path / "out"),
                              train_dataset=Dataset.from_list(preference_rows(8)))
    result = sample_step(trainer, rows=2)
    assert not result.verdict.has_signal and result.verdict.cause == "no_answer"
    assert result.distinct_answers == [0, 0] and len(result.completions[0]) == 4
    assert trainer.state.global_step == 0 and result.checkpoint_bytes > 0


def test_what_to_change_follows_the_measurements():
    """The fix lines: cut completions -> a longer completion; no format asked -> an instruction; groups that hold
    several answers but no winner -> more rows before changing the setup (few groups can be chance)."""
    from collections import Counter
    from types import SimpleNamespace

    from rlce_trl.health.signal import signal_verdict
    from rlce_trl.training.preflight import PreflightResult, hints

    def result(verdict, clipped, messages):
        return PreflightResult(prompts=["p"], messages=messages, completions=[["c"]], answers=[[None], [None]],
                               verdict=verdict, verdicts=Counter(), seconds=1.0, verifier_seconds=None,
                               clipped_share=clipped, max_completion_length=48, num_generations=4, checkpoint_bytes=1)

    args = SimpleNamespace(temperature=1.0, num_generations=4)
    plain = [[{"role": "user", "content": "Is 3 even?"}]]
    cut = hints(result(signal_verdict(0.0, 0.0, 0.0), 0.75, plain), args)
    assert "raise --max_completion_length (e.g. 96)" in cut[0] and "add a format instruction" in cut[1]
    asked = [[{"role": "user", "content": "Is 3 even? End with \\boxed{even} or \\boxed{odd}."}]]
    assert not any("format instruction" in h for h in hints(result(signal_verdict(0.0, 0.0, 0.0), 0.0, asked), args))
    tied = hints(result(signal_verdict(0.5, 0.5, 0.0, Counter(yes=3)), 0.0, asked), args)
    assert tied == ["50% of these 2 groups held 2+ answers, so a longer run may still meet a group the verifier "
                    "decides: with few rows this can be chance; rerun with --check_rows 4 before changing the setup"]
    assert hints(result(signal_verdict(0.5, 0.5, 0.5), 0.0, asked), args) == []
