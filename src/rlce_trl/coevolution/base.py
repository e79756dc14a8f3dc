"""What a co-evolution method is to the driver: roles, the phases of a round, and the data each phase trains on."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class PhaseSpec:
    """One phase of a round: one GRPO run that trains `role` with `reward_method` against frozen partners.

    Args:
        name: the phase's name in logs and file names (`generator`, `critic`, `questioner`, ...).
        role: the role trained; its checkpoint is the phase's starting point and is replaced by the phase's output.
        reward_method: the group scorer (a name of `rlce_trl.methods.REWARD_METHODS`).
        partner_role: the role whose current checkpoint is the frozen partner (`partner_model_name_or_path`);
            `None`, or a role still at the initial model, means no separate partner: the scorer uses the verifier
            (the frozen initial model).
        max_steps: optimizer steps of the phase.
        overrides: extra config keys for this phase only (`{"max_completion_length": 1024}`).
        build_in_process: the phase's data is a plain transformation of files (no model): the driver builds it
            itself instead of starting a process.
    """

    name: str
    role: str
    reward_method: str
    partner_role: str | None = None
    max_steps: int = 1
    overrides: dict[str, Any] = field(default_factory=dict)
    build_in_process: bool = False

    def to_dict(self) -> dict:
        """The phase as plain data (a job's `phase`); `PhaseSpec(**data)` reads it back."""
        return asdict(self)


def partner_round(settings: dict, steps: dict[str, int], first: str, second: str,
                  rewards: tuple[str, str]) -> list[PhaseSpec]:
    """The round of every method here: role `first` trained with `rewards[0]` against the frozen `second` (its data
    built by the driver itself), then `second` trained alone with `rewards[1]`. `settings`: `phase_steps` (over the
    method's `steps`) and `phase_overrides`."""
    steps = {**steps, **(settings.get("phase_steps") or {})}
    overrides = settings.get("phase_overrides") or {}
    return [
        PhaseSpec(first, first, rewards[0], partner_role=second, max_steps=int(steps[first]),
                  overrides=dict(overrides.get(first, {})), build_in_process=True),
        PhaseSpec(second, second, rewards[1], max_steps=int(steps[second]), overrides=dict(overrides.get(second, {}))),
    ]


@dataclass
class BuildContext:
    """What a data builder gets.

    Args:
        round: the round (0-based).
        phase: the phase whose data is built.
        checkpoints: each role's current checkpoint (the initial model for a role not trained yet).
        base_model: the initial model (also the frozen verifier).
        train_file: the corpus (the user's `--train_file`).
        output_file: where to write the phase's JSONL.
        args: `(script_args, training_args, model_args)` parsed from the recipe (`None` for in-process builds that
            need no settings).
        seed: the run's seed.
        data: the data files built so far this run, by phase name.
    """

    round: int
    phase: PhaseSpec
    checkpoints: dict[str, str]
    base_model: str
    train_file: str
    output_file: str
    args: Any = None
    seed: int = 0
    data: dict[str, str] = field(default_factory=dict)


@runtime_checkable
class CoevolutionMethod(Protocol):
    """A co-evolution method (RLAC, VisPlay, Video-Zero) as the driver runs it."""

    #: The `--method` name.
    name: str
    #: The roles trained (each keeps a checkpoint in `state.json`).
    roles: tuple[str, ...]
    #: The role validated after every round (the one whose best checkpoint is the result).
    validated_role: str

    def phases(self, round: int, settings: dict) -> list[PhaseSpec]:
        """The phases of round `round`, in order; `settings` holds the recipe's `coevolve_*` values."""

    def build_data(self, ctx: BuildContext) -> dict:
        """Write `ctx.output_file` (the phase's training JSONL) from the corpus and the current checkpoints; return
        counts for the log (`{"rows": 600, "kept": 412}`)."""
