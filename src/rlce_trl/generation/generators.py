"""Greedy generation backends of `rlce-trl evaluate` and of the checkpoint-selection callback.

A generator is any callable `prompts -> responses`, one response per conversational prompt: [`VLLMGenerator`] (the
default when vLLM is installed), [`TransformersGenerator`] or [`VisionLanguageGenerator`] (HBA video rows).

Decoding follows appendix A of the paper: temperature 0 (greedy), one response per row, thinking disabled. Each
backend's `.sample(prompts, specs)` draws seeded candidates with token log-probabilities for `rlce-trl sample`.
torch, transformers and vLLM are imported by the backend that is used, when it is built.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .hf import decoding_kwargs, eos_token_ids, evaluating, load_frozen_model, load_frozen_vlm, with_pad_token
from .sampling import Sampling

Generator = Callable[[Sequence[list[dict]]], list[str]]
BACKENDS = ("auto", "vllm", "transformers")


@dataclass
class Sampled:
    """One sampled response and the log-probability of each generated token under the raw (untempered) model."""

    text: str
    token_logprobs: list[float]


def _no_thinking(render: Callable, messages, **kwargs):
    """Render with `enable_thinking=False` (Qwen3 / Qwen3.5 templates read it); templates that reject the extra
    variable are rendered without it."""
    try:
        return render(messages, enable_thinking=False, **kwargs)
    except TypeError:
        return render(messages, **kwargs)


def render_prompt(render: Callable, messages, chat_template_kwargs: dict | None = None, **kwargs):
    """A prompt through its chat template (`render`: a tokenizer's or processor's `apply_chat_template`).
    `chat_template_kwargs=None`: thinking off where the template reads it (the evaluation protocol); a dict (a trained
    model's recorded `chat_template_kwargs`, `{}` included): exactly those, as TRL rendered the training prompts."""
    if chat_template_kwargs is None:
        return _no_thinking(render, messages, **kwargs)
    return render(messages, **kwargs, **chat_template_kwargs)


def _load(loader, path: str, dtype: str):
    """`loader(path, device, dtype)` on the GPU when there is one (`dtype="auto"`: bfloat16 there, float32 on CPU)."""
    import torch

    cuda = torch.cuda.is_available()
    auto = torch.bfloat16 if cuda else torch.float32
    return loader(path, "cuda" if cuda else None, auto if dtype == "auto" else getattr(torch, dtype))


class TransformersGenerator:
    """Greedy batched generation with a transformers causal LM (left padding, chat template, thinking disabled).

    Build it from a checkpoint path ([`TransformersGenerator.from_pretrained`]) or around a model being trained
    ([`TransformersGenerator`] with `model` and `tokenizer`, as the checkpoint-selection callback does).
    """

    #: `chat_template_kwargs` of [`render_prompt`]: `None` (thinking off) unless set to a training run's.
    chat_template_kwargs: dict | None = None

    def __init__(self, model, tokenizer, max_new_tokens: int = 512, batch_size: int = 8):
        self.model, self.tokenizer = model, tokenizer
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size

    def render(self, prompt: list[dict]) -> str:
        """The prompt's text as the model reads it (chat template and generation prompt)."""
        return render_prompt(self.tokenizer.apply_chat_template, list(prompt), self.chat_template_kwargs,
                             tokenize=False, add_generation_prompt=True)

    @classmethod
    def from_pretrained(cls, path: str, max_new_tokens: int = 512, batch_size: int = 8, dtype: str = "auto"):
        return cls(*_load(load_frozen_model, path, dtype), max_new_tokens, batch_size)

    def __call__(self, prompts: Sequence[list[dict]]) -> list[str]:
        tokenizer = with_pad_token(self.tokenizer)
        encode = functools.partial(tokenizer, return_tensors="pt", padding=True, add_special_tokens=False)
        return _generate_batched(self.model, tokenizer, [self.render(p) for p in prompts], encode,
                                 self.max_new_tokens, self.batch_size)

    def sample(self, prompts: Sequence[list[dict]], specs: Sequence[Sampling]) -> list[list[Sampled]]:
        """`len(specs)` responses per prompt, with token log-probabilities (log-softmax of the raw logits at the
        chosen tokens). Specs with equal decoding settings share one `generate` call per prompt
        (`num_return_sequences`), seeded with the first spec's seed, so a prompt's candidates do not depend on which
        other prompts are in the run (resumable sampling reproduces them)."""
        import torch

        tokenizer, model = with_pad_token(self.tokenizer), self.model
        device = next(model.parameters()).device
        groups: dict[tuple, list[int]] = {}
        for i, spec in enumerate(specs):
            groups.setdefault((spec.temperature, spec.top_p, spec.top_k), []).append(i)
        out: list[list[Sampled]] = []
        with evaluating(model):
            for prompt in prompts:
                batch = tokenizer([self.render(prompt)], return_tensors="pt", add_special_tokens=False).to(device)
                row: list[Sampled | None] = [None] * len(specs)
                for members in groups.values():
                    spec = specs[members[0]]
                    torch.manual_seed(spec.seed)
                    sampled = _generate_sampled(model, tokenizer, batch, self.max_new_tokens, spec,
                                                num_return_sequences=1 if spec.greedy else len(members))
                    for j, i in enumerate(members):
                        row[i] = sampled[0 if spec.greedy else j]
                out.append(row)
        return out


def _generate_sampled(model, tokenizer, batch, max_new_tokens: int, spec: Sampling, **extra) -> list[Sampled]:
    """`model.generate` of one encoded prompt under `spec` (`extra`: more `generate` arguments), its sequences as
    [`Sampled`]: text up to the first stop token and the log-softmax of the raw logits at the chosen tokens."""
    import torch

    with torch.no_grad():
        gen = model.generate(**batch, max_new_tokens=max_new_tokens, output_logits=True, return_dict_in_generate=True,
                             pad_token_id=tokenizer.pad_token_id, **extra, **decoding_kwargs(spec))
    new = gen.sequences[:, batch["input_ids"].shape[1]:]
    logps = torch.stack(gen.logits, dim=1).float().log_softmax(-1)
    chosen = logps.gather(-1, new[:, : logps.shape[1], None]).squeeze(-1)
    stop = {tokenizer.pad_token_id, *eos_token_ids(model, tokenizer)}
    out = []
    for k in range(new.shape[0]):
        ids = new[k].tolist()
        length = next((t for t, tok in enumerate(ids) if tok in stop), len(ids))
        out.append(Sampled(tokenizer.decode(ids[:length], skip_special_tokens=True), chosen[k, :length].tolist()))
    return out


class VisionLanguageGenerator:
    """Greedy batched generation with a transformers vision-language model (`AutoModelForImageTextToText`) and its
    processor, for prompts whose video blocks carry frames: `{"type": "video", "video": [PIL images]}`, the form
    `rlce_trl.data.hba.expand_videos` writes. The frames were already sampled (1 fps, 2..8, even) and resized
    (176x320), so the processor is told not to sample again; it still rounds the size to its patch grid.
    """

    def __init__(self, model, processor, max_new_tokens: int = 512, batch_size: int = 8):
        self.model, self.processor = model, processor
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size

    @classmethod
    def from_pretrained(cls, path: str, max_new_tokens: int = 512, batch_size: int = 8, dtype: str = "auto"):
        return cls(*_load(load_frozen_vlm, path, dtype), max_new_tokens, batch_size)

    def encode(self, prompts: Sequence[list[dict]]):
        """Model inputs of a batch (left-padded `input_ids`, `pixel_values_videos`, `video_grid_thw`, ...)."""
        conversations = [list(p) for p in prompts]
        processor_kwargs = {"padding": True, "do_sample_frames": False}  # the row builder sampled the frames
        metadata = [block.get("metadata") for conversation in conversations for message in conversation
                    if isinstance(message["content"], list) for block in message["content"]
                    if block.get("type") == "video"]  # in the order the processor reads the videos
        if metadata and all(metadata):  # source fps and frame indices: the frame timestamps some templates print
            processor_kwargs["video_metadata"] = metadata
        return _no_thinking(self.processor.apply_chat_template, conversations, add_generation_prompt=True,
                            tokenize=True, return_dict=True, return_tensors="pt", processor_kwargs=processor_kwargs)

    def __call__(self, prompts: Sequence[list[dict]]) -> list[str]:
        return _generate_batched(self.model, with_pad_token(self.processor.tokenizer), list(prompts), self.encode,
                                 self.max_new_tokens, self.batch_size)

    def sample(self, prompts: Sequence[list[dict]], specs: Sequence[Sampling]) -> list[list[Sampled]]:
        """`len(specs)` responses per prompt (video blocks with frames, as for `__call__`), with the token
        log-probabilities of the raw logits. Each prompt is encoded once; each spec is one `generate` call under its
        own seed in a forked RNG, so a candidate depends only on its prompt and spec (not on `n`, the other rows or
        the caller's RNG): a resumed run reproduces it. Video and image pad tokens are never sampled (no pixels
        would stand behind them)."""
        import torch

        tokenizer, model = with_pad_token(self.processor.tokenizer), self.model
        device = next(model.parameters()).device
        pads = [getattr(self.processor, name, None) for name in ("video_token_id", "image_token_id")]
        suppress = [t for t in pads if isinstance(t, int)] or None
        out: list[list[Sampled]] = []
        with evaluating(model):
            for prompt in prompts:
                batch = self.encode([prompt]).to(device)
                row = []
                for spec in specs:
                    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
                        torch.manual_seed(spec.seed)
                        row.append(_generate_sampled(model, tokenizer, batch, self.max_new_tokens, spec,
                                                     suppress_tokens=suppress)[0])
                out.append(row)
        return out


def _generate_batched(model, tokenizer, items: list, encode: Callable, max_new_tokens: int, batch_size: int):
    """Greedy `model.generate` over `items` in batches (left padding), decoding only the new tokens."""
    import torch

    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    device = next(model.parameters()).device
    outputs = []
    try:
        with evaluating(model), torch.no_grad():
            for start in range(0, len(items), batch_size):
                batch = encode(items[start : start + batch_size]).to(device)
                generated = model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False,
                                           pad_token_id=tokenizer.pad_token_id)
                new = generated[:, batch["input_ids"].shape[1] :]
                outputs += tokenizer.batch_decode(new, skip_special_tokens=True)
    finally:
        tokenizer.padding_side = side
    return outputs


class VLLMGenerator:
    """Greedy generation with an in-process `vllm.LLM` (temperature 0, no top-k, no penalties); text rows only.

    `engine_kwargs` go to `vllm.LLM` as they are (`dtype`, `enforce_eager`, `gpu_memory_utilization`, ...).
    """

    #: `chat_template_kwargs` as in [`render_prompt`]: `None` (thinking off) unless set to a training run's.
    chat_template_kwargs: dict | None = None

    def __init__(self, path: str, max_new_tokens: int = 512, max_model_len: int | None = None, **engine_kwargs):
        from vllm import LLM, SamplingParams

        self.llm = LLM(model=path, max_model_len=max_model_len, **engine_kwargs)
        self.params = SamplingParams(temperature=0.0, max_tokens=max_new_tokens, n=1)

    def __call__(self, prompts: Sequence[list[dict]]) -> list[str]:
        return [o.outputs[0].text for o in self._chat([list(p) for p in prompts], self.params)]

    def _chat(self, conversations: list, params):
        """`llm.chat` with thinking off, or exactly the training run's `chat_template_kwargs` ([`render_prompt`])."""
        kwargs = {"enable_thinking": False} if self.chat_template_kwargs is None else dict(self.chat_template_kwargs)
        return self.llm.chat(conversations, params, use_tqdm=False, chat_template_kwargs=kwargs)

    def sample(self, prompts: Sequence[list[dict]], specs: Sequence[Sampling]) -> list[list[Sampled]]:
        """As [`TransformersGenerator.sample`]: one request per prompt and spec, `logprobs=0` returns the sampled
        token's log-probability (vLLM's default `logprobs_mode` is the raw model output)."""
        from vllm import SamplingParams

        params = [SamplingParams(temperature=s.temperature, top_p=1.0 if s.greedy else s.top_p,
                                 top_k=-1 if s.greedy else (s.top_k or -1), seed=s.seed, logprobs=0,
                                 max_tokens=self.params.max_tokens, n=1) for s in specs]
        conversations = [list(p) for p in prompts for _ in specs]
        flat = []
        for o in self._chat(conversations, params * len(prompts)):
            c = o.outputs[0]
            flat.append(Sampled(c.text, [lp[t].logprob for t, lp in zip(c.token_ids, c.logprobs or [], strict=False)]))
        return [flat[i * len(specs) : (i + 1) * len(specs)] for i in range(len(prompts))]


def vllm_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def make_generator(path: str, backend: str = "auto", *, video: bool = False, max_new_tokens: int = 512,
                   batch_size: int = 8, dtype: str = "auto", vllm_kwargs: dict | None = None) -> Generator:
    """The generator for a checkpoint: vLLM when `backend="vllm"`, or `"auto"` and vLLM is installed; transformers
    otherwise. Video rows (`video=True`) always use [`VisionLanguageGenerator`]: this package does not feed frames
    to vLLM (yet)."""
    if backend not in BACKENDS:
        raise ValueError(f"Unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}.")
    if video:
        if backend == "vllm":
            raise ValueError("Video rows are generated with transformers (a vision-language model and its processor); "
                             "pass --backend transformers (or auto).")
        return VisionLanguageGenerator.from_pretrained(path, max_new_tokens, batch_size, dtype)
    if backend == "vllm" or (backend == "auto" and vllm_available()):
        kwargs = dict(vllm_kwargs or {})
        if dtype != "auto":
            kwargs.setdefault("dtype", dtype)
        return VLLMGenerator(path, max_new_tokens=max_new_tokens, **kwargs)
    return TransformersGenerator.from_pretrained(path, max_new_tokens, batch_size, dtype)
