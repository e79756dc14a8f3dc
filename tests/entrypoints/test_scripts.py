"""The example scripts in-process on the tiny model: the quickstart recipe (with a tiny model and 2 steps), the LoRA
switch, TRL's own GRPO script with RLCEGRPOTrainer dropped in, and the model card."""

import glob
import json
import os
import sys
from typing import ClassVar

import pytest
import torch
from helpers import CONFIGS, TINY, load_example

from rlce_trl import RLCEGRPOConfig, RLCEGRPOTrainer


def run_script(name, argv, monkeypatch):
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *argv])
    script = load_example(name)
    script_args, training_args, model_args = script.make_parser().parse_args_and_config(argv)
    return script.main(script_args, training_args, model_args)


def quickstart_argv(model, out, *extra):
    return ["--config", str(CONFIGS / "quickstart.yaml"), "--model_name_or_path", model, "--output_dir", str(out),
            "--max_steps", "2", "--save_steps", "2", *TINY, *extra]


def test_quickstart_recipe_trains_checkpoints_and_logs(tiny_model_dir, tmp_path, monkeypatch):
    out = tmp_path / "quickstart"
    trainer = run_script("train_prefeval", quickstart_argv(tiny_model_dir, out), monkeypatch)
    assert trainer.state.global_step == 2
    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    logged = [e for e in state["log_history"] if "rewards/rlce_format/mean" in e]
    assert len(logged) == 2 and "rlce/distinct_answers_mean" in logged[0]
    assert glob.glob(str(out / "completions" / "*.parquet"))
    assert (out / "model.safetensors").exists() and (out / "checkpoint-2" / "model.safetensors").exists()
    # the saved model reloads
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(out).config.num_hidden_layers == 2
    card = (out / "README.md").read_text()
    for needle in ("RLCE", "Verifier model", "`transformers`", "rlce-trl preference sample", "`quickstart.yaml`",
                   "Reinforcement Learning with Comparative Evidence for Social Intelligence"):
        assert needle in card, needle
    # the quick start shows the run's own first training prompt (the recipe's suffix included); a demo run says so
    assert "first training prompt" in card and "Answer in one short sentence" in card
    assert "A demo run of 2 steps" in card
    # the prompt suffix of the recipe reached the prompts
    assert "boxed" in trainer.train_dataset[0]["prompt"][-1]["content"]


def test_model_alias_resolves_offline(monkeypatch, tmp_path):
    from rlce_trl import models as scripts_utils

    monkeypatch.setitem(scripts_utils.MODEL_ALIASES, "smollm2-135m-instruct", lambda: str(tmp_path / "smol"))
    assert scripts_utils.resolve_model("smollm2-135m-instruct") == str(tmp_path / "smol")
    assert scripts_utils.resolve_model("Qwen/Qwen3.5-9B") == "Qwen/Qwen3.5-9B"


def test_lora_switch_uses_base_model_as_verifier(tiny_model_dir, tmp_path, monkeypatch):
    out = tmp_path / "lora"
    argv = quickstart_argv(tiny_model_dir, out, "--use_peft", "--lora_r", "4", "--lora_alpha", "8",
                           "--lora_target_modules", "q_proj", "v_proj")
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    trainer = run_script("train_prefeval", argv, monkeypatch)
    policy = trainer.accelerator.unwrap_model(trainer.model)
    assert hasattr(policy, "peft_config")
    # the verifier is the policy's base model, answering with the adapter disabled
    assert trainer.verifier.model is policy
    with policy.disable_adapter():
        x = torch.tensor([[4, 5, 6, 7]])
        assert torch.allclose(policy(x).logits, base(x).logits, atol=1e-5)
    assert (out / "adapter_config.json").exists() and not (out / "model.safetensors").exists()
    card = (out / "README.md").read_text()
    assert "LoRA" in card and "adapter disabled" in card


def test_trl_grpo_script_with_rlce_trainer_dropped_in(tiny_model_dir, tmp_path, monkeypatch):
    """TRL's own `trl/scripts/grpo.py` flow, unchanged, with GRPOTrainer / GRPOConfig replaced by the RLCE classes."""
    import trl
    from trl.scripts import grpo

    from rlce_trl.data import load_preference_sample, write_jsonl

    data = tmp_path / "data"
    write_jsonl([{"prompt": r["prompt"], "answer_options": r["answer_options"], "id": r["id"]}
                 for r in load_preference_sample("train")[:8]], data / "train.jsonl")
    monkeypatch.setattr(trl, "GRPOTrainer", RLCEGRPOTrainer)
    monkeypatch.setattr(trl, "GRPOConfig", RLCEGRPOConfig)
    argv = ["--model_name_or_path", tiny_model_dir, "--dataset_name", str(data), "--output_dir", str(tmp_path / "o"),
            "--max_steps", "2", "--num_generations", "4", "--bf16", "false", "--use_cpu", "true",
            "--activation_checkpointing", "false", "--report_to", "none", "--save_strategy", "no", *TINY[:-2],
            "--per_device_train_batch_size", "8", "--dtype", "float32"]
    script_args, training_args, model_args, dataset_args = grpo.make_parser().parse_args_and_config(argv)
    assert isinstance(training_args, RLCEGRPOConfig)
    seen = []
    monkeypatch.setattr(RLCEGRPOTrainer, "train", lambda self, **kw: seen.append(self) or
                        super(RLCEGRPOTrainer, self).train(**kw))
    grpo.main(script_args, training_args, model_args, dataset_args)
    (trainer,) = seen
    assert trainer.reward_func_names[:2] == ["rlce_verified", "rlce_format"]
    assert trainer.state.global_step == 2
    assert any("rlce/distinct_answers_mean" in e for e in trainer.state.log_history)
    assert (tmp_path / "o" / "model.safetensors").exists()


class _Args:
    verifier_mode = "server"
    verifier_model_name_or_path = "/home/someone/models/verifier"
    verifier_base_url = "http://alice:s3cret@10.0.0.5:8000/v1?api_key=sk-abc123"
    verifier_api_key = "sk-abc123"
    verifier_headers: ClassVar[dict] = {"Authorization": "Bearer sk-abc123"}
    rlce_mode = "evolving"


def test_card_settings_never_carry_credentials():
    from rlce_trl.model_card import describe_model, public_settings, redact

    settings = public_settings(_Args())
    text = json.dumps(settings)
    assert "s3cret" not in text and "sk-abc123" not in text and "alice" not in text
    assert settings["verifier_base_url"] == "http://10.0.0.5:8000/v1"
    assert "verifier_api_key" not in settings and "verifier_headers" not in settings
    assert describe_model(_Args.verifier_model_name_or_path) == "local folder `verifier`"
    scrubbed = redact("see http://bob:pw@host:1/x?token=abc and hf_abcdefghijklmnopqrstuv, Bearer xyz.123")
    assert "pw" not in scrubbed and "abc" not in scrubbed.replace("abcdefghij", "") and "xyz" not in scrubbed
    assert os.path.basename("configs/x.yaml") == "x.yaml"


def test_hba_script_text_only_trains_on_mosei_rows(tiny_model_dir, tmp_path, monkeypatch):
    """examples/train_hba.py on HBA-shaped MOSEI rows (written here), `--text_only`: closed labels reach the reward."""
    rows = [{"problem": f"<video>\n<audio>\nthe user said the food {w}. What is the sentiment?", "answer": label,
             "videos": [f"clip{i}.mp4"]} for i, (w, label) in enumerate([("yes", "positive"), ("no", "negative")] * 2)]
    train_file = tmp_path / "train.jsonl"
    train_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["--config", str(CONFIGS / "mosei_rlce.yaml"), "--model_name_or_path", tiny_model_dir,
            "--output_dir", str(tmp_path / "hba"), "--train_file", str(train_file), "--text_only", "true",
            "--max_steps", "1", "--save_strategy", "no", "--use_vllm", "false", "--use_cpu", "true", "--bf16", "false",
            "--generation_batch_size", "4", "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1",
            "--num_generations", "4", "--report_to", "none", "--beta", "0.0", "--verifier_mode", "transformers",
            *TINY[:-2]]
    trainer = run_script("train_hba", argv, monkeypatch)
    assert trainer.state.global_step == 1
    row = trainer.train_dataset[0]
    assert "gold" not in row and row["answer_options"]  # no gold reaches a reward; MOSEI's labels do
    assert "<audio>" not in str(row["prompt"]) and "rlce/distinct_answers_mean" in trainer.state.log_history[0]


def test_a_run_that_would_train_nothing_stops_before_training(tiny_model_dir, tmp_path, monkeypatch):
    from rlce_trl.errors import InputError

    out = tmp_path / "empty"
    with pytest.raises(InputError, match=r"All \d+ rows are longer than max_prompt_length=4 .*shortest has \d+"):
        run_script("train_prefeval", quickstart_argv(tiny_model_dir, out, "--max_prompt_length", "4"), monkeypatch)
    assert not (out / "model.safetensors").exists()
    # fewer prompts than one generation batch: TRL's sampler would give 0 steps
    with pytest.raises(InputError, match=r"has \d+ prompt\(s\), fewer than the 1024 one generation batch needs"):
        run_script("train_prefeval", quickstart_argv(tiny_model_dir, out, "--per_device_train_batch_size", "4096"),
                   monkeypatch)
    assert not (out / "model.safetensors").exists()


@pytest.mark.parametrize("model, needle", [("/no/such/model", "no such folder"), ("./missing", "no such folder"),
                                           ("Org/not-cached", "not in the local Hub cache"),
                                           ("bad id!", "not a Hub id"), ("EMPTY_DIR", "without config.json")])
def test_a_model_that_cannot_load_is_named_before_anything_loads(tmp_path, monkeypatch, capsys, model, needle):
    from rlce_trl.cli import main

    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    if model == "EMPTY_DIR":
        model = str(tmp_path / "empty")
        (tmp_path / "empty").mkdir()
    code = main(["train", "--config", "quickstart", "--model_name_or_path", model, "--output_dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: model_name_or_path") and err.count("\n") == 1 and needle in err


def test_a_launch_ends_with_every_rank_waiting_then_the_group_destroyed():
    """Rank 0 may still upload to the Hub or write the report when the other ranks finish: every rank waits for the
    others before the process group goes (a rank leaving early aborted under gloo, SIGABRT at exit)."""
    from types import SimpleNamespace

    from rlce_trl.training.pipeline import end_run

    calls = []
    accelerator = SimpleNamespace(wait_for_everyone=lambda: calls.append("wait"),
                                  end_training=lambda: calls.append("end"))
    end_run(SimpleNamespace(accelerator=accelerator))
    assert calls == ["wait", "end"]
