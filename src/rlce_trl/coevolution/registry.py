"""The co-evolution methods `rlce-trl coevolve --method` knows: a plain dict of classes, like
`rlce_trl.methods.REWARD_METHODS`. Each method's phases name their scorers by reward-method names of that one
registry (`PhaseSpec.reward_method`)."""

from __future__ import annotations

from ..errors import InputError
from .base import CoevolutionMethod
from .rlac_method import RLAC
from .selfplay_methods import VideoZero, VisPlay

#: `--method` name -> method class (built with the recipe's `coevolve_*` settings).
METHODS: dict[str, type[CoevolutionMethod]] = {"rlac": RLAC, "visplay": VisPlay, "video_zero": VideoZero}


def get_method(name: str, settings: dict | None = None) -> CoevolutionMethod:
    """The method `name`, built with the recipe's `coevolve_*` settings; an `InputError` naming the methods."""
    if name not in METHODS:
        raise InputError(f"--method {name!r}: use one of {', '.join(METHODS)}.")
    return METHODS[name](settings)
