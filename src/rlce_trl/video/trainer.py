"""Deprecated alias of `rlce_trl.trainer_video` (moved in 0.2)."""

from .._moved import alias

alias(__name__, "rlce_trl.trainer_video", globals())
