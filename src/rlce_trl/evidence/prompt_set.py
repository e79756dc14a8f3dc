"""Verifier prompts as data: the construction and validation text and few-shot examples, versioned.

A prompts file (JSON or YAML) names any of `system`, `construction`, `validation`, `examples` and `version`; what it
leaves out keeps today's default text (`evidence/prompts.py`), so an empty file equals the defaults. Templates fill
`{test}` (validation) and `{favoured}` / `{other}` (construction) verbatim. A few-shot example is a finished earlier
exchange: `{"kind": "validation", "context": ..., "test": ..., "verdict": "yes"}` or `{"kind": "construction",
"context": ..., "favoured": ..., "other": ..., "test": ...}`. This is what `rlce_trl.calibration` revises (the
verifier's weights stay frozen); the paper-reproduction recipes never set it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import yaml

from ..data.jsonl import write_json
from .prompts import CONSTRUCTION_TEMPLATE, VALIDATION_TEMPLATE, VERDICTS, VERIFIER_SYSTEM_PROMPT, fill

_SLOTS = {"validation": ("{test}",), "construction": ("{favoured}", "{other}")}
_EXAMPLE_FIELDS = {
    "validation": ("context", "test", "verdict"),
    "construction": ("context", "favoured", "other", "test"),
}


@dataclass(frozen=True)
class VerifierPrompts:
    """The text of the verifier's construction and validation prompts. Defaults are the built-in prompts."""

    system: str = VERIFIER_SYSTEM_PROMPT
    construction: str = CONSTRUCTION_TEMPLATE
    validation: str = VALIDATION_TEMPLATE
    examples: tuple[dict, ...] = field(default_factory=tuple)
    version: str = "default"
    calibrated_on: int = 0  # labelled cases this version was calibrated on (0: hand-written); the model card says so

    def __post_init__(self):
        problems = [] if isinstance(self.system, str) else ["`system` must be a string"]
        for kind, slots in _SLOTS.items():
            text = getattr(self, kind)
            if not isinstance(text, str):
                problems.append(f"`{kind}` must be a string")
                continue
            problems += [f"the `{kind}` template needs the slot {slot}" for slot in slots if slot not in text]
        for n, example in enumerate(self.examples):
            kind = example.get("kind") if isinstance(example, dict) else None
            if kind not in _EXAMPLE_FIELDS:
                problems.append(f"example {n} needs `kind`: validation or construction")
                continue
            if missing := [k for k in _EXAMPLE_FIELDS[kind] if not isinstance(example.get(k), str)]:
                problems.append(f"example {n} ({kind}) needs string fields {', '.join(missing)}")
            elif kind == "validation" and example["verdict"] not in VERDICTS:
                problems.append(f"example {n} has verdict {example['verdict']!r}; use yes, no or unknown")
        if problems:
            raise ValueError("Invalid verifier prompts: " + "; ".join(problems) + ".")

    def example_turns(self, kind: str) -> list[dict[str, str]]:
        """The few-shot examples of one kind as user / assistant turns, in the same shape as a real request."""
        turns = []
        for ex in self.examples:
            if ex["kind"] != kind:
                continue
            if kind == "validation":
                task, reply = fill(self.validation, test=ex["test"]), ex["verdict"]
            else:
                task, reply = fill(self.construction, favoured=ex["favoured"], other=ex["other"]), ex["test"]
            turns += [{"role": "user", "content": f"### Input\n{ex['context']}\n\n### Task\n{task}"},
                      {"role": "assistant", "content": reply}]
        return turns

    def revised(self, **changes) -> VerifierPrompts:
        """A copy with some fields changed (a calibration candidate)."""
        if "examples" in changes:
            changes["examples"] = tuple(changes["examples"])
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return {**asdict(self), "examples": [dict(e) for e in self.examples]}

    def save(self, path: str | Path) -> None:
        write_json(self.to_dict(), path)


def load_prompts(path: str | Path) -> VerifierPrompts:
    """Read a prompts file (`.json`, or `.yaml` / `.yml`). Unknown keys and bad values are one error naming the fix."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        message = f"Cannot read the prompts file {path}: {error.strerror}. Check `rlce_prompts_file`."
        raise ValueError(message) from None
    is_yaml = path.suffix in (".yaml", ".yml")
    try:
        data = (yaml.safe_load(text) or {}) if is_yaml else (json.loads(text) if text.strip() else {})
    except (yaml.YAMLError, json.JSONDecodeError) as error:
        kind = "YAML" if is_yaml else "JSON"
        raise ValueError(f"The prompts file {path} is not valid {kind}: {error}") from None
    if not isinstance(data, dict):
        raise ValueError(f"The prompts file {path} must hold one object (mapping), not {type(data).__name__}.")
    known = {"system", "construction", "validation", "examples", "version", "calibrated_on"}
    if unknown := sorted(set(data) - known):
        raise ValueError(f"The prompts file {path} has unknown keys {unknown}; allowed: {sorted(known)}.")
    if not isinstance(data.get("examples", []), list):
        raise ValueError(f"`examples` in {path} must be a list of objects.")
    data["examples"] = tuple(data.get("examples", []))
    data["version"] = str(data.get("version", path.stem))
    if not isinstance(data.get("calibrated_on", 0), int) or data.get("calibrated_on", 0) < 0:
        raise ValueError(f"`calibrated_on` in {path} must be a whole number >= 0.")
    return VerifierPrompts(**data)
