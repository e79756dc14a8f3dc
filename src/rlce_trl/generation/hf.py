"""The one place transformers models are loaded and driven for generation, shared by the verifier backends
(`transformers_backend`, `vlm_backend`) and the generators of `rlce-trl evaluate` and `sample` (`generators.py`).
torch and transformers are imported when a model is loaded, so importing this module costs nothing.
"""

from __future__ import annotations

import contextlib

from ..errors import InputError, MissingInputError, first_line

#: The `from_pretrained` keyword arguments that also decide which tokenizer or processor loads (its code, revision
#: and where it comes from); the model-only ones (`attn_implementation`, `quantization_config`, `subfolder`, ...) stay
#: with the model, as in TRL's own processor load.
TOKENIZER_KWARGS = ("trust_remote_code", "revision", "cache_dir", "token", "local_files_only", "force_download",
                    "proxies")


def tokenizer_kwargs(kwargs: dict) -> dict:
    """The entries of model `from_pretrained` keyword arguments that a tokenizer or processor load takes too."""
    return {key: kwargs[key] for key in TOKENIZER_KWARGS if key in kwargs}


def load_frozen_model(name_or_path: str, device=None, dtype=None, **kwargs):
    """Load a model and tokenizer as a frozen verifier: eval mode, no gradients, left padding.

    Under DeepSpeed ZeRO-3, transformers would shard any model loaded during training (`zero.Init`), and generating
    with a sharded model is a collective that every rank must join. The verifier copy is loaded unsharded instead,
    so each rank can score its own groups independently."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = _load_frozen(AutoModelForCausalLM, name_or_path, device, dtype, kwargs)
    return model, AutoTokenizer.from_pretrained(name_or_path, padding_side="left", **tokenizer_kwargs(kwargs))


def check_vision_language(name_or_path: str, label: str = "", what: str = "the rows carry clips", **kwargs) -> None:
    """Raise [`InputError`] (before any weight loads) unless the checkpoint is one `AutoModelForImageTextToText`
    loads: clips need a vision-language model. `label` names it in the message (default: the path); `kwargs`: the
    load's `from_pretrained` arguments (`trust_remote_code`, `revision`, ...)."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    label = label or name_or_path
    try:
        config = AutoConfig.from_pretrained(name_or_path, **tokenizer_kwargs(kwargs),
                                            **({"subfolder": kwargs["subfolder"]} if "subfolder" in kwargs else {}))
    except (OSError, ValueError) as error:
        raise MissingInputError(f"cannot load {label} ({first_line(error)}): pass a checkpoint folder.") from None
    if config.model_type not in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES:
        raise InputError(f"{label} is a text-only checkpoint ({config.model_type}), but {what}: pass a "
                         "vision-language checkpoint (Qwen3.5, Qwen3-VL), or drop the clips (video_input: text).")


def load_frozen_vlm(name_or_path: str, device=None, dtype=None, **kwargs):
    """A vision-language model and its processor as a frozen verifier (eval mode, no gradients, never ZeRO-3
    sharded: each rank scores its own groups). `kwargs` reach `from_pretrained` as in [`load_frozen_model`]."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    check_vision_language(name_or_path, **kwargs)
    try:
        processor = AutoProcessor.from_pretrained(name_or_path, **tokenizer_kwargs(kwargs))
    except ImportError as error:  # transformers' video processors need torchvision
        raise ImportError(
            f"Loading the video processor of {name_or_path} failed ({error}). Video rows need torchvision next to "
            "torch: `pip install torchvision` (the build that matches your torch)."
        ) from error
    return _load_frozen(AutoModelForImageTextToText, name_or_path, device, dtype, kwargs), processor


def _load_frozen(auto_class, name_or_path: str, device, dtype, kwargs: dict):
    """`auto_class.from_pretrained` as a frozen model on `device`, never ZeRO-3 sharded; a quantized model is placed
    while it loads (`device_map`): it cannot be moved afterwards."""
    from transformers.integrations import deepspeed as hf_ds

    if device is not None and kwargs.get("quantization_config") is not None:
        kwargs = {**kwargs, "device_map": {"": device}}
    saved = getattr(hf_ds, "_hf_deepspeed_config_weak_ref", None)
    hf_ds._hf_deepspeed_config_weak_ref = None  # no `zero.Init`: transformers would shard the model
    try:
        model = auto_class.from_pretrained(name_or_path, dtype=dtype or "auto", **kwargs)
    finally:
        hf_ds._hf_deepspeed_config_weak_ref = saved
    if device is not None and not getattr(model, "is_quantized", False):
        model.to(device)
    model.eval()
    model.requires_grad_(False)
    return model


def with_pad_token(tokenizer):
    """`tokenizer`, its end token standing in as pad token when it has none."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def eos_token_ids(model, tokenizer) -> list[int]:
    """The generation config's end tokens and the tokenizer's, sorted, without `None`."""
    eos = model.generation_config.eos_token_id
    return sorted({*([eos] if isinstance(eos, int) else (eos or [])), tokenizer.eos_token_id} - {None})


def generate_kwargs(sampling, pad_token_id: int | None, eos_ids: list[int]) -> dict:
    """`model.generate` keyword arguments for one `Sampling`: `n` sequences of up to `max_tokens` new tokens, greedy
    or sampled (temperature, top-p, top-k; `top_k=0` disables it)."""
    return {"max_new_tokens": sampling.max_tokens, "num_return_sequences": sampling.n, "pad_token_id": pad_token_id,
            "eos_token_id": eos_ids, **decoding_kwargs(sampling)}


def decoding_kwargs(sampling) -> dict:
    """Greedy, or sampled with the `Sampling`'s temperature, top-p and top-k (`top_k=0` disables it)."""
    if sampling.greedy:
        return {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
    return {"do_sample": True, "temperature": sampling.temperature, "top_p": sampling.top_p,
            "top_k": sampling.top_k or None}


@contextlib.contextmanager
def evaluating(model):
    """Eval mode inside the block; the model's own mode (training or not) afterwards."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)
