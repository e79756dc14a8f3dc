"""`activation_checkpointing` on every supported transformers (a dataclass mixin of [`RLCEGRPOConfig`]).

Newer transformers (5.25) name the switch `activation_checkpointing`, with `gradient_checkpointing` a deprecated alias
that warns; older ones (5.17-5.20, and vLLM 0.31 pins `transformers<5.18`) have only `gradient_checkpointing`, and
TRL's parser refuses unknown keys. The recipes write the current name; on an older transformers this mixin adds the
field (and `activation_checkpointing_kwargs`) and hands their values to the old names before `TrainingArguments`
reads them, so one recipe parses and trains the same on both. On a current transformers it adds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from transformers import TrainingArguments

#: The installed transformers has the current name; the mixin then adds nothing.
HAS_ACTIVATION_CHECKPOINTING = "activation_checkpointing" in {f.name for f in fields(TrainingArguments)}


@dataclass
class ActivationCheckpointingArguments:
    if not HAS_ACTIVATION_CHECKPOINTING:
        activation_checkpointing: bool | None = field(
            default=None,
            metadata={"help": "Recompute activations in the backward pass to save memory (gradient_checkpointing on "
                      "this transformers). None: gradient_checkpointing decides."},
        )
        activation_checkpointing_kwargs: dict[str, Any] | str | None = field(
            default=None,
            metadata={"help": "Keyword arguments of activation checkpointing (gradient_checkpointing_kwargs on this "
                      "transformers)."},
        )

    def translate_activation_checkpointing(self) -> None:
        """Call before `TrainingArguments.__post_init__`: on an older transformers, the current names (when set) win
        over the old ones, as they do on a newer transformers."""
        if not HAS_ACTIVATION_CHECKPOINTING:
            for new, old in _NAMES:
                if getattr(self, new) is not None:
                    setattr(self, old, getattr(self, new))

    def mirror_activation_checkpointing(self) -> None:
        """Call after `TrainingArguments.__post_init__`: both names hold the resolved value, so code that reads
        either works on every transformers."""
        if not HAS_ACTIVATION_CHECKPOINTING:
            for new, old in _NAMES:
                setattr(self, new, getattr(self, old))


_NAMES = (("activation_checkpointing", "gradient_checkpointing"),
          ("activation_checkpointing_kwargs", "gradient_checkpointing_kwargs"))
