"""Deprecated package (0.2): the baselines' group scorers live in `rlce_trl.methods` with every other reward
method."""

from .._moved import alias

alias(__name__, "rlce_trl.methods", globals())
