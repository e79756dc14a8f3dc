"""What a run directory holds for the report: the logged metrics, the evidence trail and the completions tables.

Every source is optional: an older run or a plain TRL run has no evidence trail, a run without `log_completions` no
completions, a run killed before its first checkpoint no `trainer_state.json`. What is missing or unreadable becomes a
note on the page, never an error, as long as there is something to show.
"""

from __future__ import annotations

import glob
import json
import math
import os
from dataclasses import dataclass, field

from ..audit import EVIDENCE_FILE
from ..data.jsonl import read_jsonl_lenient
from ..errors import InputError

COMPLETION_ROWS = 1000  # newest rows of the completions tables shown on the page
CELL_CHARS = 200  # of another text cell of the completions table (prompts and completions are capped by the page)


@dataclass
class RunData:
    run_dir: str
    log_history: list[dict] = field(default_factory=list)
    state_file: str | None = None
    groups: list[dict] = field(default_factory=list)
    skipped_lines: int = 0
    evidence_limit: dict | None = None
    completions: list[dict] = field(default_factory=list)
    completion_columns: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    health_alarms: list[dict] = field(default_factory=list)  # the trail's `health_alarm` lines


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


_LISTS = ("answers", "assignment", "tests", "scores", "rewards", "completions")


def valid_group(record: dict) -> bool:
    """A group record the page can show: an id, an integer step, lists where lists belong, tests as objects."""
    return (isinstance(record.get("id"), str) and isinstance(record.get("step"), int)
            and all(isinstance(record.get(k, []), list) for k in _LISTS)
            and all(isinstance(t, dict) for t in record.get("tests", [])))


def find_state_file(run_dir: str) -> str | None:
    """`RUN_DIR/trainer_state.json`, else the one of the checkpoint with the most steps; an unreadable one only when
    no other exists."""
    candidates = [os.path.join(run_dir, "trainer_state.json")]
    candidates += glob.glob(os.path.join(run_dir, "checkpoint-*", "trainer_state.json"))
    best, best_step = None, -1
    for path in candidates:
        try:
            with open(path, encoding="utf-8") as f:
                step = int(json.load(f).get("global_step") or 0)
        except (OSError, ValueError, AttributeError, TypeError):
            continue
        if step > best_step:
            best, best_step = path, step
    if best is None:  # only unreadable ones: return one, so that reading it names the file and the fix
        best = next((path for path in candidates if os.path.isfile(path)), None)
    return best


def _text(value, limit: int | None = None) -> str:
    """A prompt or completion cell as text: a string, or the contents of a list of chat messages (the last one); cut
    at `limit` characters with an ellipsis."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        messages = [m for m in value if isinstance(m, dict)]
        value = messages[-1].get("content", "") if messages else " ".join(map(str, value))
        if isinstance(value, list):  # content blocks
            value = " ".join(str(b.get("text", "")) for b in value if isinstance(b, dict))
    text = "" if value is None else str(value)
    return text if limit is None or len(text) <= limit else text[:limit] + "…"


def load_completions(run_dir: str, notes: list[str]) -> tuple[list[dict], list[str]]:
    files = sorted(glob.glob(os.path.join(run_dir, "completions", "completions_*.parquet")))
    if not files:
        return [], []
    try:
        import pandas as pd
    except ImportError:
        notes.append("The completions tables are not shown: reading them needs pandas and pyarrow.")
        return [], []
    rows: list[dict] = []
    columns: list[str] = []
    for path in reversed(files):  # newest first, until enough rows
        try:
            table = pd.read_parquet(path)
        except Exception as error:  # noqa: BLE001 -- a table half-written by a killed run
            notes.append(f"Skipped the unreadable completions table {os.path.basename(path)} "
                         f"({type(error).__name__}).")
            continue
        columns += [name for name in table.columns if name not in columns]
        for record in reversed(table.to_dict("records")):
            row = {}
            for name, value in record.items():
                if name in ("prompt", "completion"):
                    row[name] = _text(value)
                elif isinstance(value, (int, float, bool)) or value is None:
                    row[name] = _finite(float(value)) if isinstance(value, float) else value
                elif hasattr(value, "item") and not hasattr(value, "__len__"):
                    row[name] = _finite(value.item())
                else:
                    row[name] = _text(value, CELL_CHARS)
            rows.append(row)
        if len(rows) >= COMPLETION_ROWS:
            break
    return rows[:COMPLETION_ROWS], columns  # newest first


def choice_probs(logprobs) -> dict[str, float] | None:
    """A test's per-choice log-probabilities as probabilities normalised over the choices (yes / no / unknown summing
    to 1): the verifier's raw first-token probabilities are small when it spreads mass over other tokens, and read as
    "1 % sure" beside a chosen verdict. Keys of a JSON reply (`verdict=yes`) are normalised per field. None when there
    is nothing to normalise."""
    if not isinstance(logprobs, dict):
        return None
    fields: dict[str, dict[str, float]] = {}
    for key, value in logprobs.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            fields.setdefault(str(key).split("=", 1)[0] if "=" in str(key) else "", {})[str(key)] = float(value)
    out = {}
    for choices in fields.values():
        top = max(choices.values())
        weights = {k: math.exp(v - top) for k, v in choices.items()}
        total = sum(weights.values())
        out.update({k: w / total for k, w in weights.items()})
    return out or None


def read_log_history(state_file: str | os.PathLike) -> list:
    """The `log_history` list of a trainer_state.json; a corrupt file or a wrong-typed field is an error that names
    the file and the fix."""
    try:
        with open(state_file, encoding="utf-8") as f:
            state = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"{state_file} is not valid JSON ({error}): the run was killed while writing it; delete it "
                         "or restore it from a checkpoint's copy.") from None
    except OSError as error:  # unreadable (permissions, a folder): one line, as for every input file
        raise InputError(f"{state_file}: cannot read it ({error.strerror or error}); check its permissions.") from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if history is None and isinstance(state, dict):
        return []
    if not isinstance(history, list):
        raise InputError(f"{state_file}: `log_history` is a {type(history).__name__}, not a list: this is not a "
                         "trainer_state.json written by transformers; pass the output_dir of a training run.")
    return history


def load_run(run_dir: str, max_groups: int | None = None) -> RunData:
    """Read a run directory. Raises FileNotFoundError (with the fix) when it holds nothing to report."""
    if not os.path.isdir(run_dir):
        raise FileNotFoundError(f"{run_dir} is not a directory: pass the output_dir of a training run.")
    data = RunData(run_dir=run_dir)
    data.state_file = find_state_file(run_dir)
    if data.state_file:
        history = read_log_history(data.state_file)
        data.log_history = [{k: _finite(v) for k, v in e.items()} for e in history if isinstance(e, dict)]
        if len(data.log_history) < len(history):
            data.notes.append(f"Skipped {len(history) - len(data.log_history)} log_history entries of "
                              f"{data.state_file} that are not objects.")
    else:
        data.notes.append("No trainer_state.json in the run directory or its checkpoints, so there are no curves: "
                          "rlce-trl writes it at the end of training and with every checkpoint (save_strategy).")
    evidence = os.path.join(run_dir, EVIDENCE_FILE)
    if os.path.exists(evidence):
        rows, data.skipped_lines = read_jsonl_lenient(evidence)
        limits = [r for r in rows if r.get("type") == "limit"]
        data.evidence_limit = limits[-1] if limits else None
        groups = [r for r in rows if r.get("type") is None and valid_group(r)]
        data.health_alarms = [r for r in rows if r.get("type") == "health_alarm"]
        data.skipped_lines += len(rows) - len(groups) - len(limits) - len(data.health_alarms)
        if max_groups is not None and len(groups) > max_groups:
            data.notes.append(f"The page shows the newest {max_groups} of {len(groups)} groups (--max_groups).")
            groups = groups[-max_groups:]
        for test in (t for g in groups for t in g.get("tests", [])):  # for the page; the trail keeps the raw
            if probs := choice_probs(test.get("choice_logprobs")):
                test["choice_probs"] = probs
        data.groups = groups
        if data.skipped_lines:
            data.notes.append(f"Skipped {data.skipped_lines} unreadable line(s) of {EVIDENCE_FILE} (a run killed "
                              "while writing leaves its last line cut).")
        if data.evidence_limit:
            data.notes.append(f"The evidence trail stops at step {data.evidence_limit.get('step')}: it reached its "
                              "size limit (raise rlce_evidence_max_mb to keep more).")
    if not data.groups:
        data.notes.append(f"No evidence trail ({EVIDENCE_FILE}) in this run directory: it comes from a plain TRL run "
                          "or an older rlce-trl, or rlce_evidence was off. The report shows the logged metrics only.")
    data.completions, data.completion_columns = load_completions(run_dir, data.notes)
    if not data.state_file and not data.groups and not data.completions:
        raise FileNotFoundError(f"{run_dir} holds no trainer_state.json, no {EVIDENCE_FILE} and no completions: pass "
                                "the output_dir of a training run (it has them once the run has logged a step).")
    return data
