"""GPU memory plan of the RLCE recipes with the verifier co-located on vLLM, computed from the model architectures.

    python -m tools.memory_plan                 # both setups, markdown (docs/verifier.md's table)
    python -m tools.memory_plan --setup paper   # 3 x H200, Qwen3.5-9B (the paper's hardware)
    python -m tools.memory_plan --setup 80gb    # 1 x 80 GB, Qwen3-1.7B (documented overrides)

No Hub access: the architecture numbers are written below with their source, and the parameter count is computed
from them (`parameter_count`; `tests/test_memory_plan.py` checks it against transformers' own model classes built on
the meta device). The memory shares (`vllm_gpu_memory_utilization`, `verifier_gpu_memory_utilization`) are read from
the recipes in `configs/`; the 80 GB overrides are `OVERRIDES_80GB`. Everything is per GPU, in GiB (2**30 bytes).

Each training process holds (DeepSpeed ZeRO-3 with bf16: fp32 master weights and Adam moments, bf16 weights and
gradients, all sharded over the N processes) its shard of the policy and of the reference model (beta > 0), the
parameters ZeRO-3 gathers for the layer being computed (`stage3_max_live_parameters`, 1e9 by default), and the
activations of one micro-batch with activation checkpointing. Beside it, two vLLM engines get a share of the GPU's
total memory each: TRL's colocated policy engine (`vllm_gpu_memory_utilization`) and the verifier server
(`verifier_gpu_memory_utilization`), each a whole bf16 copy of the model (tensor parallel size 1) plus its KV cache.
Activation figures are estimates (formulas in `activations`); the rest is exact arithmetic on the shapes.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

GIB = 2**30
CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@dataclass(frozen=True)
class Arch:
    """The shapes that decide memory. Hybrid models (Qwen3.5) keep a KV cache only in their full-attention layers
    and a fixed-size recurrent state per sequence in their linear-attention (Gated DeltaNet) layers."""

    name: str
    source: str
    vocab: int
    hidden: int
    ffn: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    tied_embeddings: bool
    full_attention_layers: int  # layers with a KV cache
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_head_dim: int = 0  # key and value head dims are equal in Qwen3.5
    linear_conv_kernel: int = 0
    vision_params: int = 0  # vision encoder (counted in the weights; its activations are small next to the LM's)

    def parameter_count(self) -> int:
        h, full, linear = self.hidden, self.full_attention_layers, self.layers - self.full_attention_layers
        embeddings = self.vocab * h * (1 if self.tied_embeddings else 2)
        mlp = 3 * h * self.ffn
        norms = 2 * h
        gate = 2 if linear else 1  # Qwen3.5's gated attention: q_proj also produces the output gate
        attention = h * self.heads * self.head_dim * gate + 2 * h * self.kv_heads * self.head_dim
        attention += self.heads * self.head_dim * h + 2 * self.head_dim  # o_proj, q_norm and k_norm
        key_dim = self.linear_key_heads * self.linear_head_dim
        value_dim = self.linear_value_heads * self.linear_head_dim
        conv_dim = 2 * key_dim + value_dim
        delta_net = (h * (conv_dim + value_dim) + h * 2 * self.linear_value_heads  # in_proj_qkvz, in_proj_ba
                     + conv_dim * self.linear_conv_kernel + 2 * self.linear_value_heads  # conv1d, dt_bias, A_log
                     + self.linear_head_dim + value_dim * h)  # gated norm, out_proj
        return (embeddings + h + full * (attention + mlp + norms) + linear * (delta_net + mlp + norms)
                + self.vision_params)

    def kv_bytes_per_token(self) -> int:
        """bf16 K and V of every full-attention layer."""
        return self.full_attention_layers * 2 * self.kv_heads * self.head_dim * 2

    def state_bytes_per_sequence(self) -> int:
        """Recurrent + convolution state of the linear-attention layers (fp32 recurrent state, bf16 conv state)."""
        linear = self.layers - self.full_attention_layers
        if not linear:
            return 0
        key_dim = self.linear_key_heads * self.linear_head_dim
        value_dim = self.linear_value_heads * self.linear_head_dim
        recurrent = self.linear_value_heads * self.linear_head_dim * self.linear_head_dim * 4
        conv = (2 * key_dim + value_dim) * (self.linear_conv_kernel - 1) * 2
        return linear * (recurrent + conv)


QWEN35_9B = Arch(
    name="Qwen3.5-9B",
    source="Qwen/Qwen3.5-9B config.json (text_config); equal to the defaults of transformers' Qwen3_5TextConfig: "
    "32 layers = 8 x (3 Gated DeltaNet + 1 gated attention), untied embeddings; vision encoder 27 x 1152 "
    "(Qwen3_5VisionConfig)",
    vocab=248320, hidden=4096, ffn=12288, layers=32, heads=16, kv_heads=4, head_dim=256, tied_embeddings=False,
    full_attention_layers=8, linear_key_heads=16, linear_value_heads=32, linear_head_dim=128, linear_conv_kernel=4,
    vision_params=456_010_480,
)
QWEN3_1_7B = Arch(
    name="Qwen3-1.7B",
    source="Qwen/Qwen3-1.7B config.json: 28 layers, hidden 2048, 16 heads / 8 KV heads of 128, tied embeddings",
    vocab=151936, hidden=2048, ffn=6144, layers=28, heads=16, kv_heads=8, head_dim=128, tied_embeddings=True,
    full_attention_layers=28,
)


@dataclass(frozen=True)
class Setup:
    name: str
    gpus: int
    gpu_gib: float  # what NVML reports as total
    arch: Arch
    recipes: tuple[str, ...]
    overrides: dict


#: A 141 GB H200 reports 143,771 MiB; an 80 GB A100 / H100 81,559 MiB.
H200_GIB, GPU80_GIB = 143771 / 1024, 81559 / 1024
PAPER_RECIPES = ("prefeval_rlce", "prefeval_rlce_static", "prefeval_rlce_pointwise", "intentqa_rlce", "urfunny_rlce",
                 "mosei_rlce")
#: The 80 GB overrides (README, "Memory plan"): a smaller text model on one GPU, the same ZeRO-3 accelerate config.
OVERRIDES_80GB = {"model_name_or_path": "Qwen/Qwen3-1.7B", "vllm_gpu_memory_utilization": 0.27,
                  "verifier_gpu_memory_utilization": 0.18, "gradient_accumulation_steps": 16}
SETUPS = {
    "paper": Setup("3 x H200 (141 GB), Qwen3.5-9B", 3, H200_GIB, QWEN35_9B, PAPER_RECIPES, {}),
    "80gb": Setup("1 x 80 GB, Qwen3-1.7B", 1, GPU80_GIB, QWEN3_1_7B, ("prefeval_rlce",), OVERRIDES_80GB),
}
CONTEXT_GIB = 1.5  # per GPU: the trainer's CUDA context and NCCL buffers (~1 GiB) + the verifier process's (~0.5 GiB)
ZERO3_LIVE_PARAMETERS = 1e9  # DeepSpeed's stage3_max_live_parameters default
MIN_CONCURRENT = 8  # full-length sequences each engine must hold at once (vLLM queues the rest)


def load_recipe(name: str) -> dict:
    import yaml

    return yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())


def verifier_length(recipe: dict) -> int:
    """The verifier server's real maximum length for `recipe`: what the trainer passes as `--max-model-len`
    (`rlce_trl.verifiers.sizing`: the recipe's `verifier_max_model_length`, else prompt + the group's answers +
    template + reply), not the policy engine's `vllm_max_model_length`."""
    from dataclasses import fields
    from types import SimpleNamespace

    from rlce_trl.config import RLCEGRPOConfig
    from rlce_trl.verifiers.sizing import verifier_max_model_length

    defaults = {f.name: f.default for f in fields(RLCEGRPOConfig) if f.name.startswith(("rlce_", "verifier_"))}
    length = verifier_max_model_length(SimpleNamespace(**{**defaults, **recipe}), recipe.get("max_prompt_length"))
    if length is None:
        raise ValueError("the recipe sets no prompt length: the verifier would take the checkpoint's whole context")
    return length


def activations(arch: Arch, batch: int, seq: int, completion: int) -> float:
    """Bytes of one micro-batch with activation checkpointing (estimate): each layer's bf16 input kept for the
    backward pass, one layer recomputed with its backward (~ (10 h + 4 ffn) values per token, twice), and the
    completion logits (TRL computes only `logits_to_keep` = completion positions: bf16, plus one fp32 row at a
    time for the log-softmax)."""
    checkpoints = arch.layers * batch * seq * arch.hidden * 2
    one_layer = 2 * batch * seq * (10 * arch.hidden + 4 * arch.ffn) * 2
    logits = batch * (completion + 1) * arch.vocab * 2 + (completion + 1) * arch.vocab * 4
    return checkpoints + one_layer + logits


def plan(setup: Setup, recipe_name: str) -> dict:
    """Per-GPU memory of `recipe_name` on `setup` (GiB), with the KV-cache capacity of both vLLM engines."""
    recipe = {**load_recipe(recipe_name), **setup.overrides}
    arch, n = setup.arch, setup.gpus
    params = arch.parameter_count()
    batch = recipe["per_device_train_batch_size"]
    prompt, completion = recipe["max_prompt_length"], recipe["max_completion_length"]
    seq = prompt + completion
    weights_bf16 = params * 2 / GIB
    policy_share = recipe["vllm_gpu_memory_utilization"] * setup.gpu_gib
    verifier_share = recipe["verifier_gpu_memory_utilization"] * setup.gpu_gib
    rows = {
        "policy weights (bf16, ZeRO-3 shard)": params * 2 / n / GIB,
        "policy gradients (bf16, shard)": params * 2 / n / GIB,
        "optimizer: fp32 master + Adam m, v (shard)": params * 12 / n / GIB,
        "reference model (bf16, shard; beta > 0)": params * 2 / n / GIB if recipe.get("beta", 0) > 0 else 0.0,
        "ZeRO-3 gathered parameters (live)": min(ZERO3_LIVE_PARAMETERS, params) * 2 / GIB if n > 1 else 0.0,
        "activations (one micro-batch, checkpointed)": activations(arch, batch, seq, completion) / GIB,
        "CUDA contexts, NCCL": CONTEXT_GIB,
        "TRL policy engine (vLLM share)": policy_share,
        "verifier server (vLLM share)": verifier_share,
    }
    total = sum(rows.values())
    # What the vLLM shares hold: weights, ~1 GiB of activations / CUDA graphs, the rest KV cache.
    rollouts_per_rank = recipe["generation_batch_size"] // n
    prompts_per_rank = rollouts_per_rank // recipe["num_generations"]
    needed_tokens = prompts_per_rank * prompt + rollouts_per_rank * completion  # prefix caching shares the prompt
    lengths = {"policy engine": recipe.get("vllm_max_model_length", seq), "verifier": verifier_length(recipe)}
    engines = {}
    for engine, share in (("policy engine", policy_share), ("verifier", verifier_share)):
        pool = share - weights_bf16 - 1.0  # ~1 GiB of vLLM activations / CUDA graphs
        per_sequence = lengths[engine] * arch.kv_bytes_per_token() + arch.state_bytes_per_sequence()
        engines[engine] = {"share_gib": share, "weights_gib": weights_bf16, "kv_gib": pool,
                           "max_length": lengths[engine],
                           "full_sequences": int(pool * GIB / per_sequence) if pool > 0 else 0}
    fits = total <= setup.gpu_gib and all(e["full_sequences"] >= MIN_CONCURRENT for e in engines.values())
    return {"setup": setup.name, "recipe": recipe_name, "model": arch.name, "params": params, "rows": rows,
            "total_gib": total, "gpu_gib": setup.gpu_gib, "headroom_gib": setup.gpu_gib - total, "fits": fits,
            "engines": engines,
            "rollout_tokens_per_rank": needed_tokens, "micro_batch": f"{batch} x {seq}",
            "shares": (recipe["vllm_gpu_memory_utilization"], recipe["verifier_gpu_memory_utilization"])}


def markdown(plans: list[dict]) -> str:
    """One column per plan, one row per part (GiB per GPU)."""
    head = "| part (GiB per GPU) | " + " | ".join(f"{p['setup']}: `{p['recipe']}`" for p in plans) + " |"
    lines = [head, "|---|" + "---:|" * len(plans)]
    for key in plans[0]["rows"]:
        lines.append(f"| {key} | " + " | ".join(f"{p['rows'][key]:.1f}" for p in plans) + " |")
    lines.append("| **total** / GPU memory | " + " | ".join(f"**{p['total_gib']:.1f}** / {p['gpu_gib']:.1f}"
                                                          for p in plans) + " |")
    lines.append("| headroom (GPU memory - total) | " + " | ".join(f"{p['headroom_gib']:.1f}" for p in plans) + " |")
    for engine in ("policy engine", "verifier"):
        lines.append(f"| {engine}: weights + KV cache (full-length sequences at once, of tokens) | " + " | ".join(
            f"{p['engines'][engine]['weights_gib']:.1f} + {p['engines'][engine]['kv_gib']:.1f} "
            f"({p['engines'][engine]['full_sequences']} x {p['engines'][engine]['max_length']:,})" for p in plans)
            + " |")
    lines.append("| micro-batch (sequences x tokens) | " + " | ".join(p["micro_batch"] for p in plans) + " |")
    lines.append("| rollout tokens per rank and step (prompts shared) | " + " | ".join(
        f"{p['rollout_tokens_per_rank'] // 1000}k" for p in plans) + " |")
    return "\n".join(lines)


def default_plans() -> list[dict]:
    """The README's columns: the paper's hardware on its longest-context (PrefEval) and video (MOSEI) recipes, and
    the 80 GB overrides."""
    return [plan(SETUPS["paper"], "prefeval_rlce"), plan(SETUPS["paper"], "mosei_rlce"),
            plan(SETUPS["80gb"], "prefeval_rlce")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setup", choices=sorted(SETUPS), help="one setup, every recipe it covers")
    args = parser.parse_args(argv)
    if args.setup:
        setup = SETUPS[args.setup]
        plans = [plan(setup, name) for name in setup.recipes]
    else:
        plans = default_plans()
    for arch in {p["model"]: s.arch for p in plans for s in SETUPS.values() if s.arch.name == p["model"]}.values():
        print(f"{arch.name}: {arch.parameter_count() / 1e9:.2f} B parameters, "
              f"KV {arch.kv_bytes_per_token() / 1024:.0f} KiB/token, "
              f"state {arch.state_bytes_per_sequence() / 2**20:.0f} MiB/sequence ({arch.source})")
    print()
    print(markdown(plans))
    bad = [f"{p['setup']} / {p['recipe']}" for p in plans if not p["fits"]]
    if bad:
        print(f"\nDOES NOT FIT: {', '.join(bad)}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
