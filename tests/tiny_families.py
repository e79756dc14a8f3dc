"""Tiny random checkpoints of the model families users bring, built offline from transformers' config classes.

`FAMILIES` holds every causal-LM family that TRL's GRPO tests train (`test_train`'s `trl-internal-testing/tiny-*`
checkpoints: Qwen2, Qwen3, Qwen3-MoE, Llama, Mistral, Gemma 2, Cohere 2, GLM-4 MoE, GPT-OSS, NemotronH), plus the
paper's Qwen3.5 (text; the vision-language one is `testing_utils.build_tiny_vlm`), Gemma 3 and LFM2 (a hybrid whose
cache holds convolution state only). Each is two layers of hidden size 64 (head size 32), with the features that make
the family what it is kept on: sliding windows shorter than the prompts, mixtures of experts, attention sinks,
Mamba-2 / Gated DeltaNet / short-convolution layers beside full attention.
"""

from __future__ import annotations

from pathlib import Path

#: family -> (config class, model class, config fields beyond the shared sizes)
FAMILIES: dict[str, tuple[str, str, dict]] = {
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 32}),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  {"head_dim": 32, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}),
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": 8}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {"head_dim": 32, "sliding_window": 8}),
    "cohere2": ("Cohere2Config", "Cohere2ForCausalLM", {"sliding_window": 8}),
    "glm4_moe": ("Glm4MoeConfig", "Glm4MoeForCausalLM",
                 {"head_dim": 32, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                  "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "n_shared_experts": 1}),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM",
                {"head_dim": 32, "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 8}),
    "nemotron_h": ("NemotronHConfig", "NemotronHForCausalLM",
                   {"head_dim": 32, "hybrid_override_pattern": "M*", "mamba_num_heads": 4, "mamba_head_dim": 16,
                    "ssm_state_size": 16, "n_groups": 1}),
    "qwen3_5": ("Qwen3_5TextConfig", "Qwen3_5ForCausalLM",
                {"head_dim": 32, "layer_types": ["linear_attention", "full_attention"], "linear_num_key_heads": 2,
                 "linear_num_value_heads": 2, "linear_key_head_dim": 16, "linear_value_head_dim": 16}),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM",
               {"head_dim": 32, "sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"]}),
    "lfm2": ("Lfm2Config", "Lfm2ForCausalLM", {"layer_types": ["conv", "full_attention"]}),
}
#: the families TRL's `test_train` parametrizes over
TRL_TEST_TRAIN = ("qwen2", "qwen3", "qwen3_moe", "llama", "mistral", "gemma2", "cohere2", "glm4_moe", "gpt_oss",
                  "nemotron_h")
#: families whose cache holds recurrent or convolution state
HYBRIDS = ("nemotron_h", "qwen3_5", "lfm2")


def build_family(family: str, path: str | Path, tokenizer, *, hidden_size: int = 64, seed: int = 0,
                 sharpen: float = 1.0, **overrides) -> str:
    """Save a random two-layer checkpoint of `family` with `tokenizer` to `path`; returns the path as a string.
    `sharpen` scales every weight but the norms (a random tiny model's logits are otherwise nearly flat, and its
    decisions the same everywhere); `overrides` replace config fields (vLLM's CPU kernels want head size 64)."""
    import torch
    import transformers

    config_class, model_class, extra = FAMILIES[family]
    config = getattr(transformers, config_class)(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=2 * hidden_size, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
        **{**extra, **overrides},
    )
    torch.manual_seed(seed)
    model = getattr(transformers, model_class)(config)
    if sharpen != 1.0:
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if "norm" not in name:
                    parameter.mul_(sharpen)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)
