"""Deprecated package (0.2): `rlce_trl.video.trainer` is now `rlce_trl.trainer_video`, `rlce_trl.video.media` is
`rlce_trl.data.media` and `VideoArguments` lives in `rlce_trl.config_video`."""

from .._moved import alias

alias(__name__, "rlce_trl.config_video", globals())
