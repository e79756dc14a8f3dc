"""RLCE from the stock TRL CLI (docs/trl-cli.md): `rlce_trl.rlce_reward` (and its async form
`rlce_trl.rlce_reward_async`) is an [`~rlce_trl.rewards.RLCEReward`] built from the environment, so that `trl grpo`
and `trl rloo`, which take reward functions as dotted import paths and no custom trainer, train with RLCE rewards.
`RLCE_VERIFIER` (required) describes the verifier (a model folder or Hub id, or server URLs); `RLCE_CONFIG` (optional)
is a YAML or JSON file of `rlce_*` / `verifier_*` settings. Both are read, and the settings checked by
`RLCEGRPOConfig`, when the name is first looked up (before TRL loads the model); the verifier is built when the
reward is first called.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile

from .errors import InputError, did_you_mean
from .rewards import AsyncRLCEReward, RLCEReward

logger = logging.getLogger(__name__)

VERIFIER_ENV = "RLCE_VERIFIER"
CONFIG_ENV = "RLCE_CONFIG"


def reward_options(config_file: str | None = None, **fields) -> dict:
    """The `rlce_*` / `verifier_*` settings of a YAML / JSON file (if any) and `fields` (which win), over
    `RLCEGRPOConfig`'s defaults, checked by `RLCEGRPOConfig` itself. Raises [`InputError`] naming the file and the
    fix."""
    import yaml

    from .config import REWARD_PREFIXES, RLCEGRPOConfig

    known = {f.name for f in dataclasses.fields(RLCEGRPOConfig)}
    given = {}
    if config_file:
        try:
            with open(config_file) as f:
                given = yaml.safe_load(f) or {}
        except (OSError, yaml.YAMLError) as error:
            reason = f"{type(error).__name__}: {str(error).splitlines()[0]}"
            raise InputError(f"{CONFIG_ENV}={config_file}: cannot read it ({reason}); point it to a YAML or JSON "
                             "file of rlce_* settings.") from None
        if not isinstance(given, dict):
            raise InputError(f"{CONFIG_ENV}={config_file}: expected a mapping of rlce_* / verifier_* settings, "
                             f"got {type(given).__name__}.")
    given = {**given, **fields}
    unknown = [k for k in given if k not in known]
    if unknown:
        raise InputError(f"{CONFIG_ENV}={config_file}: {unknown[0]!r} is not an RLCEGRPOConfig setting"
                         f"{did_you_mean(unknown[0], known)}.")
    read = {k: v for k, v in given.items() if k.startswith(REWARD_PREFIXES)}
    try:
        config = RLCEGRPOConfig(output_dir=tempfile.gettempdir(), bf16=False, use_cpu=True, report_to="none", **read)
    except (TypeError, ValueError) as error:
        raise InputError(f"{CONFIG_ENV}={config_file}: " + " ".join(str(error).split())) from None
    return config.reward_options()


def reward_from_env(asynchronous: bool = False) -> RLCEReward:
    """The reward `RLCE_VERIFIER` and `RLCE_CONFIG` describe (module docstring)."""
    description = os.environ.get(VERIFIER_ENV, "").strip()
    if not description:
        raise InputError(f"{VERIFIER_ENV} is not set: set it to the verifier (the initial model's folder or Hub id, "
                         "or a verifier server URL such as http://127.0.0.1:8000) before using rlce_trl.rlce_reward.")
    options = reward_options(os.environ.get(CONFIG_ENV) or None)
    cls = AsyncRLCEReward if asynchronous else RLCEReward
    return cls(description, options=options)


_BUILT: dict[str, RLCEReward] = {}


def __getattr__(name):
    if name in ("rlce_reward", "rlce_reward_async"):
        if name not in _BUILT:
            _BUILT[name] = reward_from_env(asynchronous=name == "rlce_reward_async")
        return _BUILT[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
