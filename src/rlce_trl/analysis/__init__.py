"""Reward analyses from logged rollout groups with gold labels (evaluation only; paper sections 4.2-4.3).

Pure functions (Python + numpy; matplotlib is imported only inside the plotting functions):

- [`variation`]: share of reward variation between correct and incorrect rollouts;
- [`reversals`]: how often a method reverses USC's or the Policy-Judge's wrong preferences;
- [`composition`]: aggregate-verdict accuracy versus the number of composed tests and the fraction of incorrect tests;
- [`simulation`]: the same curves for a synthetic validator of known error rate, and a synthetic verifier;
- [`groups_log`]: the logged-groups JSONL format, its producer (`log_groups`) and checked reader (`read_log`);
- [`tables`], [`plots`]: the bench's tables and plots (the command: `rlce-trl analyze`, [`rlce_trl.cli.analyze`]).
"""

from .composition import (
    accuracy_vs_incorrect_fraction,
    accuracy_vs_num_tests,
    composition_curve,
    incorrect_fraction,
    verdict_credit,
)
from .reversals import reversal_counts, reversal_rate, wrong_preferences
from .simulation import simulate_composition
from .variation import pairwise_ordering, variation_share, variation_split

__all__ = [
    "accuracy_vs_incorrect_fraction",
    "accuracy_vs_num_tests",
    "composition_curve",
    "incorrect_fraction",
    "pairwise_ordering",
    "reversal_counts",
    "reversal_rate",
    "simulate_composition",
    "variation_share",
    "variation_split",
    "verdict_credit",
    "wrong_preferences",
]
