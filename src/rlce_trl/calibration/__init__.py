"""Verifier calibration (VeriFine mapped onto RLCE, opt-in and label-light): measured verdict quality on labelled
claims, calibrated verdicts, prompt revision by coactive calibration and query selection.

The verifier's weights stay frozen; only its prompts and few-shot examples (and, opt-in, how a verdict is read from
its choice probabilities) are calibrated. The paper-reproduction recipes never use this package: RLCE's claim is that
no gold labels are needed.
"""
