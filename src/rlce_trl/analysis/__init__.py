"""Reward analyses from logged rollout groups with gold labels (evaluation only; paper sections 4.2-4.3).

Pure functions (Python + numpy; matplotlib is imported only inside the plotting functions):

- [`variation`]: share of reward variation between correct and incorrect rollouts;
- [`reversals`]: how often a method reverses USC's or the Policy-Judge's wrong preferences;
- [`composition`]: aggregate-verdict accuracy versus the number of composed tests and the fraction of incorrect tests;
- [`simulation`]: the same curves for a synthetic validator of known error rate, and a synthetic verifier;
- [`groups_log`]: the logged-groups JSONL format, its producer (`log_groups`) and checked reader (`read_log`);
- [`tables`], [`plots`]: the bench's tables and plots (the command: `rlce-trl analyze`, [`rlce_trl.cli.analyze`]).
"""
