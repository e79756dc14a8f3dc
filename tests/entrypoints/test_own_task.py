"""The README's "Your own task": the worked example (examples/own_task, written by its own script) trains one step
with a shipped recipe through `rlce-trl train --task`, and `rlce-trl evaluate --task` scores the trained model; a
user's rows in the package's format train through `--dataset_name FILE`, and `evaluate --data` scores rows with a
gold column but no `id` / `task`."""

import json
import sys

from helpers import ROOT, TINY

from rlce_trl.cli import main

EXAMPLE = ROOT / "examples" / "own_task"


def test_the_example_data_is_what_its_script_writes(tmp_path):
    sys.path.insert(0, str(EXAMPLE))
    try:
        import make_data
    finally:
        sys.path.remove(str(EXAMPLE))
    make_data.write(tmp_path)
    for split in ("train", "validation", "test"):
        assert (tmp_path / f"{split}.jsonl").read_text() == (EXAMPLE / f"{split}.jsonl").read_text()


def test_train_one_step_on_the_worked_example_then_evaluate_it(tiny_model_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    monkeypatch.setattr(sys, "argv", ["rlce-trl", "train"])
    assert main(["train", "--task", str(EXAMPLE / "parity.yaml"), "--config", "quickstart", "--model_name_or_path",
                 tiny_model_dir, "--output_dir", str(out), "--max_steps", "1", "--save_strategy", "no", *TINY]) == 0
    assert (out / "model.safetensors").exists() and "Number parity" in (out / "README.md").read_text()
    capsys.readouterr()
    assert main(["evaluate", "--task", str(EXAMPLE / "parity.yaml"), "--model_name_or_path", str(out),
                 "--output_dir", str(tmp_path / "eval"), "--backend", "transformers", "--max_new_tokens", "8",
                 "--limit", "4", "--no_progress"]) == 0
    summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert summary["task"] == "parity" and summary["metric"] == "accuracy" and summary["num_done"] == 4
    assert 0.0 <= summary["score"] <= 1.0


def test_task_file_errors_stop_training_before_a_model_loads(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text((EXAMPLE / "parity.yaml").read_text().replace("metric: accuracy ", "metric: acuracy "))
    code = main(["train", "--task", str(bad), "--config", "quickstart", "--model_name_or_path", "/no/such/model",
                 "--output_dir", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "unknown metric 'acuracy': did you mean 'accuracy'?" in err


def test_dataset_name_takes_a_file_of_package_rows(tiny_model_dir, tmp_path, monkeypatch):
    rows = [{"id": k, "prompt": [{"role": "user", "content": f"Is {n} even or odd?"}],
             "answer_options": ["even", "odd"]} for k, n in enumerate(range(20, 28))]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(sys, "argv", ["rlce-trl", "train"])
    assert main(["train", "--config", "quickstart", "--dataset_name", str(data), "--model_name_or_path",
                 tiny_model_dir, "--output_dir", str(tmp_path / "o"), "--max_steps", "1", "--save_strategy", "no",
                 *TINY]) == 0


def test_evaluate_data_scores_rows_without_id_or_task(tiny_model_dir, tmp_path):
    data = tmp_path / "mine.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"What is {n} plus one?", "gold": str(n + 1)}) + "\n"
                            for n in range(3)))
    assert main(["evaluate", "--data", str(data), "--model_name_or_path", tiny_model_dir, "--output_dir",
                 str(tmp_path / "e"), "--backend", "transformers", "--max_new_tokens", "4", "--no_progress"]) == 0
    summary = json.loads((tmp_path / "e" / "summary.json").read_text())
    assert summary["metric"] == "exact_match" and summary["num_done"] == 3 and summary["score"] is not None


def test_sample_takes_the_task_file(tmp_path):
    """`rlce-trl sample --task`: the task's test split (with its gold) becomes the candidate pool `select` reads."""
    import argparse

    from rlce_trl.cli import sample
    from rlce_trl.generation.generators import Sampled

    parser = argparse.ArgumentParser()
    sample.add_arguments(parser)
    args = parser.parse_args(["--model_name_or_path", "unused", "--task", str(EXAMPLE / "parity.yaml"),
                              "--output_dir", str(tmp_path / "pool"), "--n", "2", "--diversify", "off",
                              "--style", "boxed"])
    fake = lambda prompts, specs: [[Sampled("\\boxed{odd}", [-0.1])] * len(specs) for _ in prompts]  # noqa: E731
    assert sample.main(args, sampler=fake) == 0
    pooled = [json.loads(line) for line in (tmp_path / "pool" / "pool.jsonl").read_text().splitlines()]
    assert len(pooled) == 12 and {r["gold"] for r in pooled} == {"even", "odd"}
