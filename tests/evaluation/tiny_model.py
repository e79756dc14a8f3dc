"""A tiny random Llama causal LM with a word-level tokenizer and a ChatML template, built offline in seconds."""

from __future__ import annotations

import re
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|pad|>", "<|unk|>", "<|im_start|>", "<|im_end|>"]


def build_tiny_model(path: Path, corpus: list[str], hidden_size: int = 32) -> Path:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = {w for text in corpus for w in re.findall(r"\w+|[^\w\s]", text)} | {"\\", "boxed", "{", "}"}
    vocab = {tok: i for i, tok in enumerate(SPECIAL + sorted(words - set(SPECIAL)))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|unk|>"))
    core.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token="<|unk|>",
        pad_token="<|pad|>",
        eos_token="<|im_end|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    # Llama, not Qwen2: AutoTokenizer would swap in Qwen2Tokenizer for a qwen2 config and re-map the vocabulary
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        eos_token_id=vocab["<|im_end|>"],
        pad_token_id=vocab["<|pad|>"],
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = vocab["<|im_end|>"]
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
