"""Whether a step has a learning signal, in absolute terms: a pure verdict with its cause and fix.

The alarm rules compare a run with its own first steps, so a run that never had a signal never alarms. This
module answers the absolute question from the first step on: GRPO learns only from groups whose rewards differ,
and RLCE's rewards can differ only when rollouts hold an answer, a group holds two or more distinct answers and
the verifier decides between them. [`signal_verdict`] takes the three shares (and the verifier's verdict counts)
and returns a [`SignalVerdict`]: `has_signal`, and when there is none, the first link of that chain that broke
(`cause`) with one plain line naming it and what to change ([`SignalVerdict.line`]). The trainer's monitor logs
the line at every step without signal and stops a run that has had none after `signal_patience` steps;
`rlce-trl check` prints the same verdict for one sampled step.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InputError
from .metrics import GroupSummary, _spread, answered_share, verdict_mix

#: Steps a run may go without any learning signal before it stops (`health_signal_patience`; 0 turns the stop off).
SIGNAL_PATIENCE = 2
#: An environment variable that changes that default (e.g. `0` for a test suite of tiny random models).
SIGNAL_PATIENCE_ENV = "RLCE_HEALTH_SIGNAL_PATIENCE"


def default_signal_patience() -> int:
    """`health_signal_patience`'s default: [`SIGNAL_PATIENCE`], or `$RLCE_HEALTH_SIGNAL_PATIENCE` when set."""
    value = os.environ.get(SIGNAL_PATIENCE_ENV, "").strip()
    try:
        return int(value) if value else SIGNAL_PATIENCE
    except ValueError:
        raise InputError(f"{SIGNAL_PATIENCE_ENV}={value!r}: use a whole number of steps (0 turns the stop off)."
                         ) from None


class NoLearningSignalError(InputError):
    """The run had no learning signal in its first `health_signal_patience` steps and was stopped; the message is the
    monitor's line (cause and fix). Raised by `RLCEGRPOTrainer.train` after the checkpoint of the stop step is
    saved; `rlce-trl train` and the scripts print it as their last line and exit with status 2."""

#: Verdict keys that mean the verifier decided nothing: `"unknown"` (its explicit abstention), and unreadable replies
#: (counted `"invalid"` by the scorers, `"none"` in the group summaries).
ABSTAINED = frozenset({"unknown", "invalid", "none"})

#: The causes, in the order they are checked (each one's line names the fix).
CAUSES = {
    "no_answer": ("no completion held an answer: the policy does not write the answer format (\\boxed{...})",
                  "add a format instruction (a recipe's `prompt_suffix` or the task's `system_prompt`), raise "
                  "`max_completion_length`, or use a model that follows instructions; `rlce-trl check` tries this "
                  "in a minute"),
    "one_answer": ("every rollout of each group gives the same answer, so the verifier has nothing to compare",
                   "raise `temperature` or `num_generations`, or use prompts the model is less sure of"),
    "verifier_abstained": ("the verifier abstained on everything: none of its replies held a verdict",
                           "check the verifier model and its prompts (`rlce-trl check` shows its verdicts), raise "
                           "`rlce_validation_max_tokens`, or use a larger verifier"),
    "equal_rewards": ("groups hold several answers but their rewards do not differ (the verifier picked no winner)",
                      "check the verifier's verdicts (`rlce-trl check`), use a larger verifier, or raise "
                      "`num_generations`"),
}


@dataclass(frozen=True)
class SignalVerdict:
    """Whether one step (or a window of steps) had a learning signal.

    Attributes:
        has_signal: some group's rewards differ (a GRPO advantage is non-zero).
        cause: `None` with signal, else a key of [`CAUSES`].
        answered_share: share of rollouts that hold an answer (`None`: no rollouts).
        multi_answer_share: share of groups with two or more distinct answers (`None`: no groups).
        spread_share: share of groups whose rewards differ (`None`: no groups).
        abstained_share: share of the verifier's verdicts that are abstentions (`None`: no verdicts).
    """

    has_signal: bool
    cause: str | None
    answered_share: float | None
    multi_answer_share: float | None
    spread_share: float | None
    abstained_share: float | None = None

    @property
    def line(self) -> str:
        """One plain line: the shares, and without signal the cause and the fix."""
        shares = (f"answered {percent(self.answered_share)} of rollouts, {percent(self.multi_answer_share)} of groups "
                  f"with 2+ answers, {percent(self.spread_share)} with rewards that differ")
        if self.has_signal:
            return f"learning signal: {shares}"
        cause, fix = CAUSES[self.cause]
        return f"no learning signal: {cause} ({shares}); fix: {fix}"


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def signal_verdict(answered_share: float | None, multi_answer_share: float | None, spread_share: float | None,
                   verdicts: Counter | dict | None = None) -> SignalVerdict:
    """The verdict from the three shares of a step and the verifier's verdict counts (`verdict -> count`, `None` when
    not known). Signal: some group's rewards differ (`spread_share > 0`). Without it the cause is the first of:
    no rollout answered; no group holds two answers; the verifier abstained on every verdict it gave; the rewards
    are equal anyway."""
    abstained = None
    if verdicts:
        total = sum(verdicts.values())
        abstained = sum(n for k, n in verdicts.items() if str(k) in ABSTAINED) / total if total else None
    parts = dict(answered_share=answered_share, multi_answer_share=multi_answer_share, spread_share=spread_share,
                 abstained_share=abstained)
    if spread_share:
        return SignalVerdict(True, None, **parts)
    broken = {"no_answer": not answered_share, "one_answer": not multi_answer_share,
              "verifier_abstained": abstained == 1.0}
    return SignalVerdict(False, next((c for c, b in broken.items() if b), "equal_rewards"), **parts)


def group_signal(groups: Sequence[GroupSummary], verdicts: Counter | dict | None = None) -> SignalVerdict:
    """[`signal_verdict`] of scored groups ([`GroupSummary`]); `verdicts` default: the groups' own."""
    multi = sum(len(g.distinct) >= 2 for g in groups) / len(groups) if groups else None
    rewarded = [g for g in groups if g.rewards]
    spread = sum(_spread(g.rewards) > 0 for g in rewarded) / len(rewarded) if rewarded else (0.0 if groups else None)
    return signal_verdict(answered_share(groups), multi, spread, verdict_mix(groups) if verdicts is None else verdicts)
