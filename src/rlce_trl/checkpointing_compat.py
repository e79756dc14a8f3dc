"""`activation_checkpointing` on every supported transformers (the config's compatibility fields and their hand-over).

Newer transformers (5.25) name the switch `activation_checkpointing`, with `gradient_checkpointing` a deprecated alias
that warns; older ones (5.17-5.20, and vLLM 0.31 pins `transformers<5.18`) have only `gradient_checkpointing`, and
TRL's parser refuses unknown keys. The recipes write the current name; on an older transformers [`RLCEGRPOConfig`]
adds the field (and `activation_checkpointing_kwargs`), and [`translate_activation_checkpointing`] hands their values
to the old names before `TrainingArguments` reads them, so one recipe parses and trains the same on both. On a current
transformers the config adds nothing and both functions do nothing.
"""

from __future__ import annotations

from dataclasses import fields

from transformers import TrainingArguments

#: The installed transformers has the current name; the config then adds no field.
HAS_ACTIVATION_CHECKPOINTING = "activation_checkpointing" in {f.name for f in fields(TrainingArguments)}

_NAMES = (("activation_checkpointing", "gradient_checkpointing"),
          ("activation_checkpointing_kwargs", "gradient_checkpointing_kwargs"))


def translate_activation_checkpointing(args) -> None:
    """Call before `TrainingArguments.__post_init__`: on an older transformers, the current names (when set) win over
    the old ones, as they do on a newer transformers."""
    if not HAS_ACTIVATION_CHECKPOINTING:
        for new, old in _NAMES:
            if getattr(args, new) is not None:
                setattr(args, old, getattr(args, new))


def mirror_activation_checkpointing(args) -> None:
    """Call after `TrainingArguments.__post_init__`: both names hold the resolved value, so code that reads either
    works on every transformers."""
    if not HAS_ACTIVATION_CHECKPOINTING:
        for new, old in _NAMES:
            setattr(args, new, getattr(args, old))
