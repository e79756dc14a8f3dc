"""Co-evolution runs side by side, with their compute: the `state.json` that `rlce-trl coevolve` writes (validation
per round, best round, wall / CPU / device hours per phase), and optionally RLCE runs for the paper's cost ratio
("co-evolution costs 3-6 times RLCE's GPU-hours", App. D.4-D.6).

    rlce-trl analyze coevolve runs/prefeval_rlac [--rlce outputs/prefeval_rlce --rlce_gpus 8]

An RLCE run's device-hours are its `train_runtime` (from `trainer_state.json`) times `--rlce_gpus`.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..report.data import read_log_history
from . import state as run_state


def load_coevolve(path: str | Path) -> dict:
    """A co-evolution run's `state.json` (the run folder or the file), read as the driver reads it."""
    path = Path(path)
    folder = path if path.is_dir() or not path.name.endswith(".json") else path.parent
    state = run_state.read_state(folder)
    if state is None:
        raise InputError(f"No state.json under {path}: pass the --output_dir of `rlce-trl coevolve`.")
    state["run"] = folder.name
    return state


def rlce_device_hours(path: str | Path, gpus: int) -> float:
    """An RLCE run's device-hours: `train_runtime` of its `trainer_state.json` times `gpus`."""
    file = Path(path) / "trainer_state.json"
    if not file.is_file():
        raise InputError(f"{file}: no such file; pass the output_dir of a finished training run.")
    runtimes = [e["train_runtime"] for e in read_log_history(file) if isinstance(e, dict) and "train_runtime" in e]
    if not runtimes:
        raise InputError(f"{file} has no train_runtime: pass the output_dir of a finished training run.")
    return runtimes[-1] * gpus / 3600


def table(runs: list[dict], rlce_hours: float | None = None) -> str:
    """Markdown: per run the validation score of every round, the best round, hours (wall, CPU, device) and, with
    an RLCE reference, the device-hours ratio."""
    width = max((len(r["validations"]) for r in runs), default=0)
    head = ["run", "method", *[f"round {i}" for i in range(width)], "best", "wall h", "CPU h", "device h"]
    head += ["x RLCE"] if rlce_hours else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    for run in runs:
        scores = [v.get("score") for v in run["validations"]]
        cells = [run["run"], run["method"]]
        cells += ["n/a" if s is None else f"{100 * s:.2f}" for s in scores] + [""] * (width - len(scores))
        best = run.get("best")
        cells.append(f"round {best['round']}" if best else "-")
        totals = run_state.totals(run)
        cells += [f"{totals['wall_s'] / 3600:.2f}", f"{totals['cpu_s'] / 3600:.2f}", f"{totals['device_hours']:.2f}"]
        if rlce_hours:
            cells.append(f"{totals['device_hours'] / rlce_hours:.1f}")
        status = "" if run.get("done") else " (unfinished)"
        lines.append("| " + " | ".join(cells) + " |" + status)
    return "\n".join(lines)


def per_phase(run: dict) -> str:
    """Markdown: wall seconds and device-hours per phase and step kind of one run."""
    lines = [f"{run['run']}:", "| phase / step | runs | wall s | device h |", "|---|---:|---:|---:|"]
    lines += [f"| {k.replace('/', ' / ')} | {v['runs']} | {v['wall_s']:.1f} | {v['device_hours']:.3f} |"
              for k, v in run_state.per_phase(run).items()]
    return "\n".join(lines)
