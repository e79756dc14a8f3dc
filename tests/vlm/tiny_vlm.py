"""A tiny random Qwen3.5 vision-language checkpoint, built locally (no Hub): the architecture and processor of the
paper's policy (Qwen3.5-9B, Qwen3-VL processor: 16-pixel patches, 2x2 merge, 2-frame temporal patches), sized for CPU.

The tokenizer is byte-level BPE with no merges (one token per byte) plus the Qwen special tokens; the chat template is
a short Qwen-style template that renders text, image and video blocks (a video is a bare `<|video_pad|>`: the
Qwen3-VL processor expands it into `<t seconds><|vision_start|>...<|vision_end|>` per temporal patch itself). Weights are random: the tests check shapes,
plumbing and determinism, not answers.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "<|im_start|>{{ message['role'] }}\n"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for block in message['content'] -%}"
    "{%- if block['type'] == 'text' -%}{{ block['text'] }}"
    "{%- elif block['type'] == 'image' -%}<|vision_start|><|image_pad|><|vision_end|>"
    "{%- elif block['type'] == 'video' -%}<|video_pad|>"
    "{%- endif -%}{%- endfor -%}{%- endif -%}"
    "<|im_end|>\n"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant\n"
    "{%- if enable_thinking is defined and enable_thinking is false -%}<think>\n\n</think>\n\n{%- endif -%}"
    "{%- endif -%}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
           "<|video_pad|>"]


def build_tiny_vlm(path: str | Path, seed: int = 0) -> Path:
    """Write a tiny Qwen3.5 VLM checkpoint (model, tokenizer, image and video processors, chat template) to `path`."""
    import torch
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import (
        Qwen2VLImageProcessor,
        Qwen3_5Config,
        Qwen3_5ForConditionalGeneration,
        Qwen3VLProcessor,
        Qwen3VLVideoProcessor,
    )
    from transformers.models.qwen3_5.tokenization_qwen3_5 import Qwen3_5Tokenizer

    path = Path(path)
    vocab = {char: i for i, char in enumerate(sorted(ByteLevel.alphabet()))}
    for token in SPECIAL:
        vocab[token] = len(vocab)
    tokenizer = Qwen3_5Tokenizer(vocab=vocab, merges=[], eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.add_special_tokens({"additional_special_tokens": SPECIAL[1:]})
    processor = Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessor(patch_size=16, merge_size=2, temporal_patch_size=2),
        video_processor=Qwen3VLVideoProcessor(),
        tokenizer=tokenizer,
        chat_template=CHAT_TEMPLATE,
    )
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL}
    config = Qwen3_5Config(
        text_config={
            "vocab_size": len(vocab),
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "layer_types": ["linear_attention", "full_attention"],
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 32,
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 2,
            "linear_key_head_dim": 16,
            "linear_value_head_dim": 16,
            "max_position_embeddings": 4096,
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
        },
        vision_config={
            "depth": 1,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": 64,
            "num_position_embeddings": 256,
            "deepstack_visual_indexes": [],
        },
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    torch.manual_seed(seed)
    model = Qwen3_5ForConditionalGeneration(config).eval()
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path
