"""rlce-trl: Reinforcement Learning with Comparative Evidence for TRL.

Public names are imported lazily, so `import rlce_trl` (and the torch-free method core under `rlce_trl.evidence`)
does not pay for torch and TRL until they are used.
"""

__version__ = "0.1.0.dev0"

_EXPORTS = {
    "RLCEGRPOTrainer": "trainer",
    "RLCEGRPOConfig": "config",
    "RLCEReward": "rewards",
    "rlce_format": "rewards",
    "AsyncRLCEReward": "rewards",
    "rlce_reward": "trl_reward",
    "rlce_reward_async": "trl_reward",
    "EvidencePipeline": "evidence.pipeline",
    "EvidenceSettings": "evidence.pipeline",
    "GroupScorer": "scoring",
    "ScorerBase": "scoring",
    "build_scorer": "methods",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'rlce_trl' has no attribute {name!r}")
