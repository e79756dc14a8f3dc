"""Co-evolution baselines (RLCE paper App. D.4-D.6): two policies trained against each other, phase by phase.

Every phase is one GRPO run of `RLCEGRPOTrainer` with a special group scorer (`rlac_generator`, `rlac_critic`, ...,
registered in `rlce_trl.methods`) and a frozen partner model (`partner_*` config keys). The driver (`rlce-trl
coevolve`, [`rlce_trl.coevolution.driver`]) alternates the phases round after round, each in its own process, builds
the data between them, validates after every round, keeps the best checkpoint and resumes from `state.json`.

Modules: `driver` (the loop), `phase` (one step's process), `base` (the method protocol), `registry` with
`rlac_method` and `selfplay_methods` (the methods), `corpus`, `state` (`state.json`) and `summary`.

The methods' rewards, scorers and data builders live with every other reward method in `rlce_trl.methods`
(`rlac`, `visplay`, `video_zero`, `selfplay`, `pseudo_label`, `bleu`, `lexicons`).

Nothing here imports torch at module level.
"""

from .base import CoevolutionMethod, PhaseSpec

__all__ = ["CoevolutionMethod", "PhaseSpec"]
