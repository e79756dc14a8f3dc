"""The one training pipeline (`rlce_trl.training.pipeline.train`): the length filter measures exactly the prompt that
is trained on (prompt suffix and the method's system prompt included), on HBA text rows as on PrefEval rows."""

import json
import sys

import pytest
from helpers import CONFIGS, TINY, load_example


def trained_prompts(script, argv, monkeypatch) -> list:
    """The prompts of the dataset the pipeline hands the trainer (the trainer itself is not built)."""
    seen = []
    monkeypatch.setattr("rlce_trl.training.pipeline.train_rlce", lambda s, t, m, data, *a, **k: seen.append(data))
    monkeypatch.setattr(sys, "argv", [f"{script}.py", *argv])
    module = load_example(script)
    module.main(*module.make_parser().parse_args_and_config(argv))
    (dataset,) = seen
    return [row["prompt"] for row in dataset]


def prompt_lengths(model, prompts) -> list[int]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    lengths = []
    for prompt in prompts:
        ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)
        lengths.append(len(ids["input_ids"] if hasattr(ids, "keys") else ids))
    return lengths


@pytest.mark.parametrize("script", ["train_hba", "train_prefeval"])
def test_the_length_filter_measures_the_prompt_that_is_trained_on(script, tiny_model_dir, tmp_path, monkeypatch):
    common = ["--model_name_or_path", tiny_model_dir, "--output_dir", str(tmp_path / "o"), "--use_cpu", "true",
              "--bf16", "false", "--use_vllm", "false", "--reward_method", "rar",
              "--prompt_suffix", "Think it over, then put the final answer in a box at the very end.", *TINY]
    if script == "train_hba":
        rows = [{"problem": f"<video>\n<audio>\nthe user said {' '.join(['food'] * (3 * i))} was good. Sentiment?",
                 "answer": "positive", "videos": [f"clip{i}.mp4"]} for i in range(8)]
        (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        argv = ["--config", str(CONFIGS / "mosei_rlce.yaml"), "--train_file", str(tmp_path / "train.jsonl"),
                "--text_only", "true", *common]
    else:
        argv = ["--config", str(CONFIGS / "quickstart.yaml"), *common]
    prompts = trained_prompts(script, argv, monkeypatch)
    text = json.dumps(prompts[0])
    assert "Think it over" in text and prompts[0][0]["role"] == "system"  # suffix and rubric system prompt trained on
    lengths = prompt_lengths(tiny_model_dir, prompts)
    limit = sorted(lengths)[len(lengths) // 2]
    kept = trained_prompts(script, [*argv, "--max_prompt_length", str(limit)], monkeypatch)
    assert kept == [p for p, n in zip(prompts, lengths, strict=True) if n <= limit]
    assert 0 < len(kept) < len(prompts)


@pytest.mark.parametrize("rank", [0, 1])
def test_the_video_length_note_is_logged_once_on_the_main_process(rank, monkeypatch, caplog, capsys, tmp_path):
    """`max_prompt_length` with video rows: a logging warning on the main process only, no print on every rank (the
    gold check right after stops the run: rows here carry gold)."""
    from types import SimpleNamespace

    from rlce_trl.errors import InputError
    from rlce_trl.training import pipeline as utils

    monkeypatch.setattr(utils, "prepare_run", lambda *a: None)
    monkeypatch.setattr(utils, "prompting_of", lambda *a: None)
    monkeypatch.setattr(utils, "policy_rows", lambda rows, *a: rows)
    monkeypatch.setattr(utils, "preflight_hook", lambda: "preflight")  # nothing saved
    task = utils.TaskRows(train=[{"id": "a", "prompt": "p", "gold": "x"}], validation=[], description="d",
                          free_text=False, media_root=str(tmp_path))
    script_args = SimpleNamespace(tta_split=None, prompt_suffix=None, max_prompt_length=64)
    with caplog.at_level("WARNING", logger="rlce_trl.training.pipeline"), pytest.raises(InputError, match="gold"):
        utils.train(script_args, SimpleNamespace(process_index=rank), None, task)
    notes = [r for r in caplog.records if "max_prompt_length applies to text prompts" in r.getMessage()]
    assert len(notes) == (1 if rank == 0 else 0) and "max_prompt_length" not in capsys.readouterr().out
