"""Elect ("Reinforce to Learn, Elect to Reason", called RLER in its paper; `rler` here already names DR Tulu's
evolving rubrics): evidence-shaped training rewards (§4.1) and the evidence-weighted inference election (§4.2).

Pure Python apart from an optional tokenizer call, like `rlce_trl.evidence`.
"""

from .election import (
    Candidate,
    ElectConfig,
    Election,
    ElectOutcome,
    apply_referee,
    cluster_score,
    consensus_keyframes,
    elect,
    evidence_score,
    jaccard,
    run_election,
    should_stop,
    trimmed_members,
)
from .parsing import (
    ELECT_SYSTEM_PROMPT,
    ElectParse,
    frame_sensitive_score,
    parse_elect_output,
    repetition_ratio,
    tail_confidence,
    transparency_score,
)
from .rewards import PAPER_WEIGHTS, ElectRewardConfig, make_elect_reward_funcs

__all__ = [
    "ELECT_SYSTEM_PROMPT", "PAPER_WEIGHTS", "Candidate", "ElectConfig", "ElectOutcome", "ElectParse",
    "ElectRewardConfig", "Election", "apply_referee", "cluster_score", "consensus_keyframes", "elect",
    "evidence_score", "frame_sensitive_score", "jaccard", "make_elect_reward_funcs", "parse_elect_output",
    "repetition_ratio", "run_election", "should_stop", "tail_confidence", "transparency_score", "trimmed_members",
]
