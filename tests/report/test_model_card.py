"""The model card after a real tiny run through the scripts' tail (`train_and_save`): the real base model instead of
TRL's "[None](https://huggingface.co/None)", a loadable `model=` in the snippet, the curves embedded and the report
linked; and the report written and announced at the end."""

import json

import pytest

from rlce_trl.model_card import base_model_id, fix_base_model

TRL_CARD = """---
library_name: transformers
tags:
- trl
---

# Model Card for out

This model is a fine-tuned version of [None](https://huggingface.co/None).

generator = pipeline("text-generation", model="None", device_map="auto")
"""


def test_a_model_alias_folder_is_named_by_its_hub_id(tmp_path):
    folder = tmp_path / "SmolLM2-135M-Instruct"
    folder.mkdir()
    assert base_model_id(str(folder)) is None  # a plain local folder: no Hub id to claim
    (folder / "rlce_source.json").write_text(json.dumps({"base_model": "HuggingFaceTB/SmolLM2-135M-Instruct"}))
    assert base_model_id(str(folder)) == "HuggingFaceTB/SmolLM2-135M-Instruct"
    card = fix_base_model(TRL_CARD, str(folder), None, str(tmp_path / "quickstart"))
    assert "huggingface.co/None" not in card and 'model="None"' not in card
    assert "[HuggingFaceTB/SmolLM2-135M-Instruct](https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct)" in card
    assert card.startswith("---\nbase_model: HuggingFaceTB/SmolLM2-135M-Instruct\n")
    assert 'model="./quickstart"' in card
    assert 'model="me/pushed"' in fix_base_model(TRL_CARD, str(folder), "me/pushed", "x")
    assert base_model_id("Qwen/Qwen3-0.6B") == "Qwen/Qwen3-0.6B"


@pytest.mark.slow
def test_card_and_report_after_a_real_run(tiny_model_dir, tmp_path, capsys):
    from datasets import Dataset
    from testing_utils import preference_rows, tiny_grpo_args

    from rlce_trl import RLCEGRPOTrainer
    from rlce_trl.scripts.utils import train_and_save

    args = tiny_grpo_args(tmp_path / "out", max_steps=2)
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=Dataset.from_list(preference_rows(16)))
    train_and_save(trainer, args)
    page = tmp_path / "out" / "report" / "index.html"
    assert f"Training report: {page}" in capsys.readouterr().out and page.exists()
    card = (tmp_path / "out" / "README.md").read_text()
    assert "huggingface.co/None" not in card and 'model="None"' not in card
    assert "fine-tuned version of local folder `model`" in card and 'model="./out"' in card
    assert "![Training curves" in card and "(report/curves.png)" in card and "(report/index.html)" in card
    assert (tmp_path / "out" / "report" / "curves.png").exists()


def test_an_alias_folder_converted_before_the_marker_is_still_named(tmp_path, monkeypatch):
    monkeypatch.setattr("rlce_trl.models.DEFAULT_CACHE", tmp_path / "cache")
    folder = tmp_path / "cache" / "SmolLM2-135M-Instruct"
    folder.mkdir(parents=True)
    assert base_model_id(str(folder)) == "HuggingFaceTB/SmolLM2-135M-Instruct"
    elsewhere = tmp_path / "mine" / "SmolLM2-135M-Instruct"
    elsewhere.mkdir(parents=True)
    assert base_model_id(str(elsewhere)) is None  # a user's own folder of that name is not claimed
