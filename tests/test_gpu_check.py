"""tools/gpu_check.py off the GPU: its pass condition, report line, models and configs, and (slow) its `--device cpu`
dry mode, which runs the GPU check's code path end to end on CPU (accelerate launch, DeepSpeed ZeRO-3 on one process,
the transformers verifier) on tiny models. The script itself has not run on a GPU here."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "tools" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_result(**overrides):
    result = {"size": "paper", "arch": "qwen3-1.7b", "params": 1.72e9, "device": "cuda", "deepspeed": True,
              "zero_stage": 3, "steps": 3, "step_seconds": [30.0, 10.0, 12.0], "verifier_seconds": [9.0, 4.0, 2.0],
              "verifier_calls": 40.0, "verifier_failed_requests": 0.0, "losses": [0.1, 0.0, -0.2],
              "peak_memory_gib": 31.5}
    return {**result, **overrides}


def test_pass_condition_needs_every_step_zero3_an_answering_verifier_and_finite_losses(gpu_check):
    ok = gpu_check.judge(run_result(), steps=3, want_zero3=True)
    assert ok["ok"] and ok["problems"] == []
    # the first step pays one-off costs: the share and the mean are of the later steps
    assert ok["verifier_share"] == pytest.approx(6.0 / 22.0) and ok["mean_step_seconds"] == pytest.approx(11.0)
    for overrides, problem in [({"steps": 2}, "2 of 3 steps"), ({"zero_stage": None, "deepspeed": False}, "ZeRO-3"),
                               ({"verifier_calls": 0.0}, "never asked"), ({"verifier_failed_requests": 2.0}, "failed"),
                               ({"losses": [0.1, float("nan")]}, "losses")]:
        bad = gpu_check.judge(run_result(**overrides), steps=3, want_zero3=True)
        assert not bad["ok"] and any(problem in p for p in bad["problems"]), (overrides, bad["problems"])
    # without DeepSpeed (where it cannot be carried) the stage is not asked for
    assert gpu_check.judge(run_result(zero_stage=None, deepspeed=False), steps=3, want_zero3=False)["ok"]


def test_report_line_names_step_time_verifier_share_memory_and_verdict(gpu_check):
    line = gpu_check.report_line(gpu_check.judge(run_result(), steps=3, want_zero3=True))
    assert "qwen3-1.7b, 1720.0 M params, ZeRO-3, cuda" in line
    assert "step 11.0 s (mean of 2)" in line and "verifier 3.0 s (27% of the step)" in line
    assert "peak memory 31.50 GiB" in line and line.endswith("PASS")
    failed = gpu_check.report_line({"size": "tiny", "ok": False, "problems": ["still running after 420 s"]})
    assert failed == "tiny: FAILED (still running after 420 s)"


def test_word_tokenizer_has_the_architectures_vocabulary_and_decodes_every_id(gpu_check):
    tokenizer = gpu_check.word_tokenizer(300, ["the", "user", "said", "yes"])
    assert len(tokenizer) == 300
    ids = list(range(4, 300))
    assert len(tokenizer.decode(ids, skip_special_tokens=True).split()) == len(ids)  # every id is a word
    text = tokenizer.apply_chat_template([{"role": "user", "content": "the user said yes"}], tokenize=False,
                                         add_generation_prompt=True)
    assert tokenizer.decode(tokenizer(text)["input_ids"]).split()[-2:] == ["<|im_start|>", "assistant"]


def test_accelerate_config_is_the_zero3_recipe_on_one_process(gpu_check, tmp_path):
    import yaml

    config = yaml.safe_load(gpu_check.accelerate_config(tmp_path / "a.yaml", "cpu", deepspeed=True).read_text())
    shipped = yaml.safe_load((ROOT / "configs" / "accelerate" / "zero3.yaml").read_text())
    assert config["deepspeed_config"] == shipped["deepspeed_config"] and config["distributed_type"] == "DEEPSPEED"
    assert config["num_processes"] == 1 and config["mixed_precision"] == "no"
    assert yaml.safe_load(gpu_check.accelerate_config(tmp_path / "b.yaml", "cuda", True).read_text())[
        "mixed_precision"] == "bf16"
    assert yaml.safe_load(gpu_check.accelerate_config(tmp_path / "c.yaml", "cpu", False).read_text())[
        "distributed_type"] == "NO"


def test_architectures_have_their_release_shapes(gpu_check):
    from transformers import Qwen3Config

    config = Qwen3Config(**gpu_check.ARCHS["qwen3-1.7b"])
    # parameters of Qwen3-1.7B (tied embeddings): 1.72 B
    embed = config.vocab_size * config.hidden_size
    attn = config.hidden_size * config.head_dim * (2 * config.num_attention_heads + 2 * config.num_key_value_heads)
    mlp = 3 * config.hidden_size * config.intermediate_size
    total = embed + config.num_hidden_layers * (attn + mlp)
    assert 1.70e9 < total < 1.73e9


def test_the_paper_run_builds_the_papers_hybrid_family_at_the_2b_size_class(gpu_check):
    """Qwen3.5 (the paper's family): Gated DeltaNet layers with every fourth layer full attention, its vocabulary,
    about 1.9 B parameters (what one GPU trains in full under ZeRO-3 within the check's minutes); the CPU dry mode
    builds the same architecture with one layer of each kind."""
    import torch
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    from rlce_trl.generation.caches import decoding_path

    config = Qwen3_5TextConfig(**gpu_check.ARCHS["qwen3.5-2b"])
    assert config.layer_types.count("full_attention") == 6 and config.layer_types.count("linear_attention") == 18
    with torch.device("meta"):
        model = Qwen3_5ForCausalLM(config)
    assert 1.85e9 < model.num_parameters() < 1.92e9 and config.vocab_size == 248320
    assert decoding_path(model) == "recurrent"  # the verifier takes the hybrid path on it
    test = Qwen3_5TextConfig(**gpu_check.ARCHS["qwen3.5-test"])
    assert test.layer_types == ["linear_attention", "full_attention"] and test.vocab_size == 248320


def test_the_tiny_model_loads_and_its_vocabulary_covers_the_prompts(gpu_check, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    built = gpu_check.build_model("tiny", "qwen3-test", tmp_path / "tiny", "cpu")
    model = AutoModelForCausalLM.from_pretrained(built["path"])
    tokenizer = AutoTokenizer.from_pretrained(built["path"])
    assert model.config.vocab_size == len(tokenizer) and built["params"] == model.num_parameters()
    from rlce_trl.data.sample import load_preference_sample

    text = load_preference_sample("train")[0]["prompt"][-1]["content"]
    assert tokenizer.unk_token_id not in tokenizer(text)["input_ids"]


@pytest.mark.slow
def test_cpu_dry_mode_trains_under_zero3_and_passes(tmp_path):
    """The `paper` run (the architecture built from a config); the `tiny` run takes the same path (about 2 minutes
    more here)."""
    pytest.importorskip("deepspeed")
    out = tmp_path / "results.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))  # the documented command, from the repository root
    done = subprocess.run([sys.executable, "-m", "tools.gpu_check", "--device", "cpu", "--runs", "paper",
                           "--workdir", str(tmp_path / "work"), "--json", str(out), "--port", "29541"],
                          capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    results = json.loads(out.read_text())
    assert [r["size"] for r in results] == ["paper"]
    for r in results:
        assert r["ok"] and r["zero_stage"] == 3 and r["deepspeed"] and r["num_processes"] == 1
        assert r["steps"] == 2 and r["verifier_calls"] > 0 and r["peak_memory_gib"] is None  # no GPU figures on CPU
    paper = results[0]
    assert paper["arch"] == "qwen3.5-test" and paper["params"] > 248320 * 64  # the architecture's full vocabulary
    assert "PASS" in done.stdout and "ZeRO-3" in done.stdout
