"""The paper's recipes run the verifier co-located on vLLM with the memory shares of tools/memory_plan.py, the plan
fits the paper's hardware (3 x H200, Qwen3.5-9B) and one 80 GB GPU (Qwen3-1.7B overrides), its parameter counts
equal transformers' models built on the meta device, and docs/verifier.md's table is the script's output."""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("memory_plan", ROOT / "tools" / "memory_plan.py")
memory_plan = sys.modules["memory_plan"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(memory_plan)

#: recipe -> (verifier_mode, verifier share, verifier TP size, policy-engine share)
PAPER_VERIFIER = {name: ("colocate", 0.18, 1, 0.25) for name in memory_plan.PAPER_RECIPES}


@pytest.mark.parametrize("name", sorted(PAPER_VERIFIER))
def test_paper_recipe_verifier_settings(name):
    recipe = yaml.safe_load((ROOT / "configs" / f"{name}.yaml").read_text())
    mode, share, tp, policy_share = PAPER_VERIFIER[name]
    assert (recipe["verifier_mode"], recipe["verifier_gpu_memory_utilization"],
            recipe["verifier_tensor_parallel_size"]) == (mode, share, tp)
    if recipe.get("video_input") == "video":  # TRL's vLLM engine cannot take the clips: the policy generates itself
        assert recipe["use_vllm"] is False
    else:
        assert recipe["use_vllm"] and recipe["vllm_mode"] == "colocate"
    assert recipe["vllm_gpu_memory_utilization"] == policy_share
    assert recipe["verifier_enable_sleep_mode"] is False and recipe["vllm_enable_sleep_mode"] is False
    assert share + policy_share < 0.95  # RLCEGRPOConfig's own check
    assert "verifier_mode transformers" in (ROOT / "configs" / f"{name}.yaml").read_text()  # the CPU note


def test_cpu_quickstart_stays_on_transformers():
    recipe = yaml.safe_load((ROOT / "configs" / "quickstart.yaml").read_text())
    assert recipe["verifier_mode"] == "transformers" and not recipe.get("use_vllm", False)


def test_parameter_counts_match_transformers_models():
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration, Qwen3Config, Qwen3ForCausalLM

    a = memory_plan.QWEN35_9B
    config = Qwen3_5Config(
        text_config=dict(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.ffn, num_hidden_layers=a.layers,
                         num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, head_dim=a.head_dim,
                         linear_num_key_heads=a.linear_key_heads, linear_num_value_heads=a.linear_value_heads,
                         linear_key_head_dim=a.linear_head_dim, linear_value_head_dim=a.linear_head_dim,
                         linear_conv_kernel_dim=a.linear_conv_kernel, tie_word_embeddings=False),
        vision_config=dict(out_hidden_size=a.hidden), tie_word_embeddings=False)
    assert config.text_config.layer_types.count("full_attention") == a.full_attention_layers
    with torch.device("meta"):
        model = Qwen3_5ForConditionalGeneration(config)
    assert sum(p.numel() for p in model.parameters()) == a.parameter_count()
    b = memory_plan.QWEN3_1_7B
    config = Qwen3Config(vocab_size=b.vocab, hidden_size=b.hidden, intermediate_size=b.ffn, num_hidden_layers=b.layers,
                         num_attention_heads=b.heads, num_key_value_heads=b.kv_heads, head_dim=b.head_dim,
                         tie_word_embeddings=True)
    with torch.device("meta"):
        model = Qwen3ForCausalLM(config)
    assert sum(p.numel() for p in model.parameters()) == b.parameter_count()


@pytest.mark.parametrize("setup", sorted(memory_plan.SETUPS))
def test_every_recipe_of_a_setup_fits(setup):
    for name in memory_plan.SETUPS[setup].recipes:
        plan = memory_plan.plan(memory_plan.SETUPS[setup], name)
        assert plan["fits"], (setup, name, plan["total_gib"], plan["engines"])


def test_a_share_that_does_not_fit_is_reported(monkeypatch):
    setup = memory_plan.SETUPS["paper"]
    greedy = memory_plan.Setup(setup.name, setup.gpus, setup.gpu_gib, setup.arch, setup.recipes,
                               {"vllm_gpu_memory_utilization": 0.5})
    assert not memory_plan.plan(greedy, "prefeval_rlce")["fits"]


def test_readme_table_is_the_scripts_output():
    readme = (ROOT / "docs" / "verifier.md").read_text()  # the memory plan's page
    assert memory_plan.markdown(memory_plan.default_plans()) in readme
    shares = {(r[3], r[1]) for r in PAPER_VERIFIER.values()}
    assert len(shares) == 1  # one plan for every paper recipe, the one the README states
    (policy_share, verifier_share), = shares
    assert f"vllm_gpu_memory_utilization: {policy_share}" in readme
    assert f"verifier_gpu_memory_utilization: {verifier_share}" in readme
    assert "verifier_mode: colocate" in readme and "`verifier_tensor_parallel_size: 1`" in readme
    for key, value in memory_plan.OVERRIDES_80GB.items():
        assert f"--{key} {value}" in readme, key


@pytest.mark.parametrize("name", sorted(PAPER_VERIFIER))
def test_gpu_check_scales_each_paper_recipe_down_with_its_verifier_settings(name, tmp_path):
    spec = importlib.util.spec_from_file_location("gpu_check_colocate", ROOT / "tools" / "gpu_check_colocate.py")
    check = sys.modules["gpu_check_colocate"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    from rlce_trl import RLCEGRPOConfig

    config = RLCEGRPOConfig(**check.scale_down(str(ROOT / "configs" / f"{name}.yaml"), str(tmp_path), use_cpu=True))
    mode, share, tp, policy_share = PAPER_VERIFIER[name]
    assert (config.verifier_mode, config.verifier_gpu_memory_utilization, config.verifier_tensor_parallel_size,
            config.vllm_gpu_memory_utilization) == (mode, share, tp, policy_share)
    recipe = yaml.safe_load((ROOT / "configs" / f"{name}.yaml").read_text())
    assert config.use_vllm == (recipe.get("video_input") != "video") and config.vllm_mode == "colocate"
    assert config.max_steps == 1
    assert config.generation_batch_size % config.num_generations == 0 and config.max_completion_length == 32


def test_verifier_kv_is_sized_with_the_verifiers_own_length(capsys):
    """The verifier's KV cache holds the verifier's longest request (prompt + the group's answers + template +
    reply: what the trainer passes as --max-model-len), not the policy engine's vllm_max_model_length; the plan
    prints each GPU's headroom."""
    plan = memory_plan.plan(memory_plan.SETUPS["paper"], "prefeval_rlce")
    verifier, policy = plan["engines"]["verifier"], plan["engines"]["policy engine"]
    assert policy["max_length"] == 8704
    assert verifier["max_length"] == 8192 + 4 * (512 + 8) + 512 + 256 > 8704
    per_sequence = verifier["max_length"] * memory_plan.QWEN35_9B.kv_bytes_per_token() + \
        memory_plan.QWEN35_9B.state_bytes_per_sequence()
    assert verifier["full_sequences"] == int(verifier["kv_gib"] * memory_plan.GIB / per_sequence)
    assert plan["headroom_gib"] == pytest.approx(plan["gpu_gib"] - plan["total_gib"])
    assert memory_plan.main([]) == 0
    out = capsys.readouterr().out
    assert f"| headroom (GPU memory - total) | {plan['headroom_gib']:.1f} |" in out and "11,040" in out
