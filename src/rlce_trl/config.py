"""RLCEGRPOConfig: GRPOConfig plus the verifier and the RLCE reward settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import GRPOConfig

from .baselines import REWARD_METHODS
from .evidence.pipeline import MODES, EvidenceSettings
from .verifiers.base import Sampling

VERIFIER_MODES = ("transformers",)


@dataclass
class RLCEGRPOConfig(GRPOConfig):
    r"""
    Configuration class for [`RLCEGRPOTrainer`].

    Everything of [`~trl.GRPOConfig`] applies unchanged; this class only adds the frozen verifier (`verifier_*`) and
    the comparative-evidence reward (`rlce_*`). Defaults are the paper's settings (appendix C) for PrefEval and
    IntentQA; the recipes under `configs/` set the per-task values (e.g. 3 tests per direction for MOSEI, 6 for
    UR-FUNNY).

    > Parameters that control the verifier

    Parameters:
        verifier_mode (`str`, *optional*, defaults to `"transformers"`):
            Backend of the frozen verifier. `"transformers"`: an in-process copy of the initial model (reusing the
            trainer's reference model or the PEFT base model when that is safe).
        verifier_model_name_or_path (`str`, *optional*):
            Model that serves as frozen verifier. Defaults to the initial checkpoint of the policy.
        verifier_batch_size (`int`, *optional*, defaults to `16`):
            Prompts per forward batch of the transformers backend.

    > Parameters that control the RLCE reward

    Parameters:
        reward_method (`str`, *optional*, defaults to `"rlce"`):
            The group reward: `"rlce"`, or a label-free baseline run on the same verifier for comparison:
            `"rlce_static"`, `"rlce_pointwise"`, `"usc"`, `"policy_judge"`, `"ttrl"`, `"rar"`, `"rler"`
            (see `rlce_trl.baselines`).
        rlce_mode (`str`, *optional*, defaults to `"evolving"`):
            `"evolving"`: tests regenerated every step for the current answers (RLCE). `"static"`: tests built once
            per prompt and answer pair, then reused with their verdicts (ablation; saved with checkpoints).
            `"pointwise"`: tests built per answer alone, reward when a majority is satisfied (ablation).
        rlce_tests_per_direction (`int`, *optional*, defaults to `1`):
            Evidence tests sampled per direction of each answer pair (pointwise: per answer).
        rlce_tie_break_tests_per_direction (`int`, *optional*, defaults to `1`):
            Extra tests per direction for each comparison left unresolved by a tie (one extra round); `0` disables
            tie-breaking.
        rlce_verified_weight (`float`, *optional*, defaults to `0.8`):
            Weight of the verification reward.
        rlce_format_weight (`float`, *optional*, defaults to `0.2`):
            Weight of the `\boxed{}` format reward.
        rlce_labels_column (`str`, *optional*, defaults to `"answer_options"`):
            Dataset column holding the closed label set of a row; a missing column or an empty list means free text.
        rlce_construction_temperature (`float`, *optional*, defaults to `1.0`):
            Sampling temperature of test construction.
        rlce_construction_top_p (`float`, *optional*, defaults to `0.95`):
            Top-p of test construction.
        rlce_construction_top_k (`int`, *optional*, defaults to `20`):
            Top-k of test construction (`0` disables it).
        rlce_construction_max_tokens (`int`, *optional*, defaults to `128`):
            Token limit of one constructed test.
        rlce_validation_max_tokens (`int`, *optional*, defaults to `16`):
            Token limit of one verdict.
        rlce_equivalence_max_tokens (`int`, *optional*, defaults to `256`):
            Token limit of one group's equivalence judgement (free text).
        rlce_redact_answers (`bool`, *optional*, defaults to `True`):
            Redact verbatim mentions of candidate answers from tests before validation.
    """

    verifier_mode: str = field(
        default="transformers",
        metadata={"help": "Backend of the frozen verifier.", "choices": list(VERIFIER_MODES)},
    )
    verifier_model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Model that serves as frozen verifier. Defaults to the initial checkpoint of the policy."},
    )
    verifier_batch_size: int = field(
        default=16, metadata={"help": "Prompts per forward batch of the transformers verifier backend."}
    )
    reward_method: str = field(
        default="rlce",
        metadata={
            "help": "Group reward: 'rlce', or a baseline on the same verifier (rlce_static, rlce_pointwise, usc, "
            "policy_judge, ttrl, rar, rler).",
            "choices": list(REWARD_METHODS),
        },
    )
    rlce_mode: str = field(
        default="evolving",
        metadata={
            "help": "'evolving' (tests regenerated every step), 'static' (built once per prompt and answer pair, "
            "reused) or 'pointwise' (tests per answer alone, majority rule).",
            "choices": list(MODES),
        },
    )
    rlce_tests_per_direction: int = field(
        default=1, metadata={"help": "Evidence tests per direction of each answer pair (pointwise: per answer)."}
    )
    rlce_tie_break_tests_per_direction: int = field(
        default=1,
        metadata={"help": "Extra tests per direction for each comparison left tied (one round); 0 disables."},
    )
    rlce_verified_weight: float = field(default=0.8, metadata={"help": "Weight of the verification reward."})
    rlce_format_weight: float = field(default=0.2, metadata={"help": "Weight of the \\boxed{} format reward."})
    rlce_labels_column: str = field(
        default="answer_options",
        metadata={"help": "Column with a row's closed label set; missing or empty means free text."},
    )
    rlce_construction_temperature: float = field(default=1.0, metadata={"help": "Temperature of test construction."})
    rlce_construction_top_p: float = field(default=0.95, metadata={"help": "Top-p of test construction."})
    rlce_construction_top_k: int = field(default=20, metadata={"help": "Top-k of test construction (0: off)."})
    rlce_construction_max_tokens: int = field(default=128, metadata={"help": "Token limit of one constructed test."})
    rlce_validation_max_tokens: int = field(default=16, metadata={"help": "Token limit of one verdict."})
    rlce_equivalence_max_tokens: int = field(
        default=256, metadata={"help": "Token limit of one group's equivalence judgement (free text)."}
    )
    rlce_redact_answers: bool = field(
        default=True, metadata={"help": "Redact mentions of candidate answers from tests before validation."}
    )

    def __post_init__(self):
        problems = []
        if self.num_generations is not None and self.num_generations < 2:
            problems.append(
                f"num_generations={self.num_generations}: RLCE compares the distinct answers of a rollout group, so "
                "set num_generations to 2 or more (the paper uses 4)."
            )
        if self.verifier_mode not in VERIFIER_MODES:
            problems.append(f"verifier_mode={self.verifier_mode!r}: use one of {', '.join(VERIFIER_MODES)}.")
        if self.reward_method not in REWARD_METHODS:
            problems.append(f"reward_method={self.reward_method!r}: use one of {', '.join(REWARD_METHODS)}.")
        if self.rlce_mode not in MODES:
            problems.append(f"rlce_mode={self.rlce_mode!r}: use one of {', '.join(MODES)}.")
        for name in ("rlce_verified_weight", "rlce_format_weight"):
            if getattr(self, name) < 0:
                problems.append(f"{name}={getattr(self, name)}: reward weights must be >= 0.")
        if self.rlce_verified_weight == 0 and self.rlce_format_weight == 0:
            problems.append("rlce_verified_weight and rlce_format_weight are both 0: set at least one above 0.")
        if self.rlce_tests_per_direction < 1:
            problems.append(f"rlce_tests_per_direction={self.rlce_tests_per_direction}: set it to 1 or more.")
        if self.rlce_tie_break_tests_per_direction < 0:
            problems.append("rlce_tie_break_tests_per_direction must be >= 0 (0 disables tie-breaking).")
        if not 0 < self.rlce_construction_top_p <= 1:
            problems.append("rlce_construction_top_p must be in (0, 1].")
        if self.rlce_construction_temperature <= 0:
            problems.append("rlce_construction_temperature must be > 0: tests are sampled (the paper uses 1.0).")
        for name in ("rlce_construction_max_tokens", "rlce_validation_max_tokens", "rlce_equivalence_max_tokens"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1.")
        if self.verifier_batch_size < 1:
            problems.append("verifier_batch_size must be >= 1.")
        if problems:
            raise ValueError("Invalid RLCEGRPOConfig:\n- " + "\n- ".join(problems))
        super().__post_init__()

    def evidence_settings(self) -> EvidenceSettings:
        """The pipeline settings these fields describe."""
        return EvidenceSettings(
            mode=self.rlce_mode,
            tests_per_direction=self.rlce_tests_per_direction,
            tie_break_tests_per_direction=self.rlce_tie_break_tests_per_direction,
            construction_sampling=Sampling(
                temperature=self.rlce_construction_temperature,
                top_p=self.rlce_construction_top_p,
                top_k=self.rlce_construction_top_k,
                max_tokens=self.rlce_construction_max_tokens,
            ),
            validation_max_tokens=self.rlce_validation_max_tokens,
            equivalence_max_tokens=self.rlce_equivalence_max_tokens,
            redact_answers=self.rlce_redact_answers,
        )
