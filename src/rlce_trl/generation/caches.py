"""What a model's cache holds, read from its config: keys and values in every layer, or recurrent / convolution state
beside them (hybrids: Qwen3.5's Gated DeltaNet, NemotronH's and Falcon-H1's Mamba, LFM2's convolutions), or a kind
this package does not know. [`decoding_path`] names the path each kind takes through the transformers backend
([`rlce_trl.generation.kv_decoding`]); the rest builds, copies and reads such caches for it.
"""

from __future__ import annotations


def cache_kwarg(model) -> str:
    """`cache` (transformers >= 5.24) or `past_key_values` (before), as the model's forward names it."""
    import inspect

    inner = model.get_base_model() if hasattr(model, "get_base_model") else model  # a PEFT model passes it through
    return "cache" if "cache" in inspect.signature(inner.forward).parameters else "past_key_values"


#: How a model's requests are decoded: `"keys-values"` (every layer holds keys and values: prefixes shared, rows
#: batched with masked pads), `"recurrent"` (some layers hold recurrent or convolution state: prefixes shared, each
#: continuation on its own copy of the prefix state, fed alone), `"generate"` (a cache this module does not know:
#: every request through `model.generate`, no prefix shared).
DECODING_PATHS = ("keys-values", "recurrent", "generate")


def is_state_layer(layer) -> bool:
    """Whether a cache layer holds recurrent / convolution state (never, in a transformers without such layers)."""
    from transformers import cache_utils

    state = getattr(cache_utils, "LinearAttentionCacheLayerMixin", None)
    return state is not None and isinstance(layer, state)


def is_kv_layer(layer) -> bool:
    from transformers.cache_utils import DynamicLayer

    return isinstance(layer, DynamicLayer)


def model_type(model) -> str:
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return getattr(getattr(inner, "config", None), "model_type", None) or type(inner).__name__


def new_cache(model):
    """An empty cache of the kind `model.generate` starts from: one layer per decoder layer, each of the type the
    config says (keys and values, sliding window, recurrent / convolution state)."""
    from transformers import DynamicCache

    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return DynamicCache(config=inner.config)


def decoding_path(model) -> str:
    """Which of `DECODING_PATHS` a model takes, read from the cache its config builds (no forward is run)."""
    from transformers import cache_utils
    from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    supports = getattr(inner, "_supports_default_dynamic_cache", None)
    if supports is not None and not supports():  # a model with its own cache class (MiniMax, xLSTM, RWKV, ...)
        return "generate"
    try:
        layers = new_cache(model).layers
    except Exception:  # noqa: BLE001 - a config the dynamic cache cannot read: leave the cache to `generate`
        return "generate"
    if all(type(layer) in (DynamicLayer, DynamicSlidingWindowLayer) for layer in layers):
        return "keys-values"  # (no layers: the cache grows them as the model writes them, keys and values only)
    # recurrent layers beside full attention; sliding-window or indexed attention next to them is left to `generate`
    odd = tuple(c for c in (DynamicSlidingWindowLayer, getattr(cache_utils, "DynamicIndexedLayer", None)) if c)

    def known(layer) -> bool:
        return (is_state_layer(layer) and not isinstance(layer, odd)) or type(layer) is DynamicLayer

    if any(is_state_layer(layer) for layer in layers) and all(known(layer) for layer in layers):
        return "recurrent"
    return "generate"


def map_batch(caches: list, fn) -> None:
    """Replace every batch-first tensor (keys, values, recurrent and convolution states) of the first of `caches` by
    `fn` of it and of the same tensor in each other cache (caches of the same layers), in place."""
    for layer, *peers in zip(*(cache.layers for cache in caches), strict=True):
        if is_kv_layer(layer) and getattr(layer, "keys", None) is not None:
            layer.keys = fn(layer.keys, *(peer.keys for peer in peers))
            layer.values = fn(layer.values, *(peer.values for peer in peers))
        if is_state_layer(layer):
            for i in range(layer.number_of_states):
                for name in ("conv_states", "recurrent_states"):
                    states = getattr(layer, name)
                    if states[i] is not None:
                        states[i] = fn(states[i], *(getattr(peer, name)[i] for peer in peers))


def kv_layers(cache) -> list:
    """The layers of `cache` that hold keys and values (already written)."""
    return [layer for layer in cache.layers if is_kv_layer(layer) and getattr(layer, "keys", None) is not None]


class UnsupportedCacheError(RuntimeError):
    """The model looked for cache state this module did not build (a layer kind it does not know)."""


def forward(model, **kwargs):
    """`model(**kwargs)` over a cache built here; an error raised where a layer looks for cache state that is not
    there (IndexError, KeyError, AttributeError inside transformers) becomes [`UnsupportedCacheError`]."""
    try:
        return model(**kwargs)
    except (IndexError, KeyError, AttributeError) as error:
        raise UnsupportedCacheError(f"{type(error).__name__}: {error}") from error
