"""`state.json` of a co-evolution run: where the run is, each role's checkpoint, validations, time and device-hours.

Written atomically (a temporary file in the same folder, fsync, rename), so a kill at any point leaves either the old
or the new state, never a torn file. The driver writes it after every step; `--resume` continues from it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..data.jsonl import write_json
from ..errors import InputError

STATE_FILE = "state.json"
VERSION = 1


def new_state(method: str, base_model: str, roles: tuple[str, ...], rounds: int, validated_role: str) -> dict:
    """The state of a run before its first step."""
    return {
        "version": VERSION,
        "method": method,
        "base_model": base_model,
        "rounds": rounds,
        "round": 0,
        "step": 0,  # index of the next step within the round
        "done": False,
        "checkpoints": {role: base_model for role in roles},
        "data": {},
        "validated_role": validated_role,
        "validations": [],
        "best": None,
        "steps": [],  # one record per finished step: id, kind, phase, wall_s, cpu_s, gpus, device_hours, log
        "failed": None,
    }


def write_state(output_dir: str | os.PathLike, state: dict) -> Path:
    path = Path(output_dir) / STATE_FILE
    write_json(state, path)
    return path


def read_state(output_dir: str | os.PathLike) -> dict | None:
    """The run's state, `None` when there is none; an `InputError` naming the fix when it is unreadable."""
    path = Path(output_dir) / STATE_FILE
    if not path.exists():
        return None
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"{path} is not a co-evolution state file ({error}): pass another --output_dir, or delete "
                         "the file to start over.") from None
    if not isinstance(state, dict) or state.get("version") != VERSION:
        raise InputError(f"{path} was not written by this version of rlce-trl coevolve: pass another --output_dir.")
    return state


def per_phase(state: dict) -> dict:
    """Wall seconds, device-hours and runs summed per phase and step kind (`"<phase>/<kind>"`); a train step skipped
    for want of rows ran nothing, so it is not a run."""
    out: dict[str, dict] = {}
    for record in state["steps"]:
        entry = out.setdefault(f"{record['phase']}/{record['kind']}", {"wall_s": 0.0, "device_hours": 0.0, "runs": 0})
        entry["wall_s"] += record["wall_s"]
        entry["device_hours"] += record["device_hours"]
        entry["runs"] += 0 if record.get("skipped") else 1
    return out


def totals(state: dict) -> dict:
    """The run's time so far, summed over its finished steps: wall and CPU seconds, device- and CPU-hours."""
    steps = state["steps"]
    wall, cpu = sum(s["wall_s"] for s in steps), sum(s["cpu_s"] for s in steps)
    return {"wall_s": wall, "cpu_s": cpu, "device_hours": sum(s["device_hours"] for s in steps),
            "cpu_hours": cpu / 3600}
