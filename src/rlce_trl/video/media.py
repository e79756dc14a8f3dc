"""Deprecated alias of `rlce_trl.data.media` (moved in 0.2)."""

from .._moved import alias

alias(__name__, "rlce_trl.data.media", globals())
