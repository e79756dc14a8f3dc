"""The co-evolution driver: phases round after round, each in its own process, with a resumable state file.

A round of a method is a list of steps: for each of its phases, `build` (the phase's training data, from the corpus
and the checkpoints so far) then `train` (one GRPO run); then `validate` (the validated role, with the task's
validation function) when there is a validation file. Every step that loads a model runs as

    python -m rlce_trl.coevolution.phase --job <step folder>/job.json       (train: under `coevolve_launcher`)

so GPU memory and vLLM engines are released between phases; its output goes to `<output_dir>/logs/<step>.log`. After
every step `state.json` is rewritten atomically: the next step, each role's checkpoint, the data files, validations
and the best checkpoint, the wall, CPU and device seconds of every step and of the run. `--resume` continues at the
first step not finished (a step killed halfway reruns from scratch; a finished one never reruns). A failing step
leaves the state at that step, records it under `failed`, and raises [`PhaseFailedError`] naming the phase and its
log.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..data.jsonl import read_json, write_json
from ..errors import InputError, last_line
from ..evaluation.evaluate import OutputLock
from .base import BuildContext, CoevolutionMethod, PhaseSpec
from .state import new_state, per_phase, read_state, totals, write_state

PHASE_MODULE = "rlce_trl.coevolution.phase"
REPORT_FILE = "report.json"


class PhaseFailedError(RuntimeError):
    """A step of the run failed; the message names the round, the phase and its log."""


@dataclass
class DriverSettings:
    """How to run one co-evolution.

    Args:
        recipe: the recipe YAML every phase parses (`--config`).
        train_file / validation_file: the corpus and the validation rows (with gold); `validation_file=None` skips
            validation (the last checkpoint of the validated role is then the result).
        output_dir: the run's folder (state, logs, data, checkpoints).
        base_model: the initial model (every role starts from it; the frozen verifier throughout).
        rounds: rounds to run.
        settings: the recipe's `coevolve_*` values, passed to the method's `phases`.
        extra_args: command-line overrides passed to every step (`["--max_completion_length", "16"]`).
        launcher: the command that starts a train step's process (e.g. `["accelerate", "launch", "--config_file",
            "multi_gpu.yaml"]`); `None`: this Python.
        phase_command: the phase entry point (tests put a fake here); default `python -m rlce_trl.coevolution.phase`.
        seed: the run's seed.
    """

    recipe: str
    train_file: str
    validation_file: str | None
    output_dir: str
    base_model: str
    rounds: int
    settings: dict = field(default_factory=dict)
    extra_args: list[str] = field(default_factory=list)
    launcher: list[str] | None = None
    phase_command: list[str] | None = None
    seed: int = 0


def round_steps(method: CoevolutionMethod, round_: int, settings: DriverSettings) -> list[dict]:
    """The steps of a round: `{"id", "kind", "phase"}` (phase as a dict; `None` for validate)."""
    steps = [{"id": f"r{round_}-{phase.name}-{kind}", "kind": kind, "phase": phase.to_dict()}
             for phase in method.phases(round_, settings.settings) for kind in ("build", "train")]
    if settings.validation_file:
        steps.append({"id": f"r{round_}-validate", "kind": "validate", "phase": None})
    return steps


def _die_with_parent() -> None:  # a phase process must not outlive a driver that was killed (Linux)
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def run_command(command: list[str], log_path: Path) -> int:
    """Run one step's process with its output in `log_path`; its exit code."""
    with open(log_path, "ab") as log:
        log.write(f"$ {' '.join(command)}\n".encode())
        log.flush()
        return subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              preexec_fn=_die_with_parent, check=False).returncode


class Coevolver:
    """Runs a [`CoevolutionMethod`] with [`DriverSettings`]; `runner(command, log_path) -> exit code` starts a step's
    process (tests pass their own); `log` takes each progress line (default: this module's logger)."""

    def __init__(self, method: CoevolutionMethod, settings: DriverSettings,
                 runner: Callable[[list[str], Path], int] = run_command, log: Callable[[str], None] | None = None):
        self.method, self.settings, self.runner = method, settings, runner
        self.log = log or logging.getLogger(__name__).info  # the CLI passes print: its progress lines
        self.output_dir = Path(settings.output_dir)

    # -- the loop -----------------------------------------------------------------------------------------------------
    def run(self, resume: bool = False) -> dict:
        """Run (or, with `resume`, continue) the co-evolution; the final state."""
        self.output_dir.mkdir(parents=True, exist_ok=True)
        with OutputLock(self.output_dir, "coevolve"):
            state = self._initial_state(resume)
            while not state["done"]:
                steps = round_steps(self.method, state["round"], self.settings)
                if state["step"] >= len(steps):
                    state["round"], state["step"] = state["round"] + 1, 0
                    state["done"] = state["round"] >= state["rounds"]
                    write_state(self.output_dir, state)
                    continue
                self._run_step(state, steps[state["step"]])
                state["step"] += 1
                write_state(self.output_dir, state)
            self._write_summary(state)
            return state

    def _initial_state(self, resume: bool) -> dict:
        state = read_state(self.output_dir)
        if state is None:
            if resume:
                raise InputError(f"--resume: {self.output_dir} has no state.json; run without --resume to start.")
            state = new_state(self.method.name, self.settings.base_model, self.method.roles, self.settings.rounds,
                              self.method.validated_role)
            write_state(self.output_dir, state)
            return state
        if not resume:
            raise InputError(f"{self.output_dir} already holds a {state['method']} run: pass --resume to continue it, "
                             "or another --output_dir.")
        if state["method"] != self.method.name:
            raise InputError(f"{self.output_dir} holds a {state['method']} run, not {self.method.name}: pass "
                             f"--method {state['method']} or another --output_dir.")
        if self.settings.rounds != state["rounds"]:  # more (or fewer) rounds on resume: the recipe decides
            state["rounds"] = self.settings.rounds
            state["done"] = state["round"] >= state["rounds"]
        state["failed"] = None
        self.log(f"resuming {state['method']} at round {state['round']}, step {state['step']}")
        return state

    # -- one step -----------------------------------------------------------------------------------------------------
    def _run_step(self, state: dict, step: dict) -> None:
        phase = PhaseSpec(**step["phase"]) if step["phase"] else None
        step_dir = self.output_dir / f"round-{state['round']}" / step["id"].split("-", 1)[1]
        log_path = self.output_dir / "logs" / f"{step['id']}.log"
        job = self._job(state, step, phase, step_dir)
        skip = self._skip_reason(state, step, phase)
        if skip:  # the phase's build retained no rows: no process, the role's checkpoint stays
            self.log(f"round {state['round']}: train {phase.name} skipped ({skip}); {phase.role} stays at "
                     f"{state['checkpoints'][phase.role]}")
            state["steps"].append({"id": step["id"], "round": state["round"], "kind": step["kind"],
                                   "phase": phase.name, "wall_s": 0.0, "cpu_s": 0.0, "gpus": 0, "device_hours": 0.0,
                                   "log": None, "result": {}, "skipped": skip})
            return
        done = _read_report(step_dir)
        if done is not None and read_json(step_dir / "job.json") == job:  # finished; the driver died before recording
            self.log(f"round {state['round']}: {step['id']} had finished before the driver stopped: not rerun")
            self._record(state, step, phase, job, done, done.get("wall_s", 0.0), 0.0, log_path)
            return
        if step_dir.exists():  # leftovers of a step killed halfway: it reruns from scratch
            shutil.rmtree(step_dir)
        step_dir.mkdir(parents=True)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        write_json(job, step_dir / "job.json")
        self.log(f"round {state['round']}: {step['kind']} {phase.name if phase else state['validated_role']} "
                 f"(log: {log_path})")
        start, cpu_before = time.monotonic(), _children_cpu()
        if step["kind"] == "build" and phase.build_in_process:
            code = self._build_here(state, phase, job, log_path)
        else:
            launcher = (step["kind"] == "train" and self.settings.launcher) or [sys.executable]
            entry = self.settings.phase_command or [*launcher, "-m", PHASE_MODULE]
            code = self.runner([*entry, "--job", str(step_dir / "job.json")], log_path)
        wall, cpu = time.monotonic() - start, _children_cpu() - cpu_before
        report = _read_report(step_dir)
        if code != 0 or report is None:
            state["failed"] = {"step": step["id"], "kind": step["kind"], "phase": phase.name if phase else "validate",
                               "log": str(log_path), "returncode": code}
            write_state(self.output_dir, state)
            what = f"phase '{phase.name}' ({step['kind']})" if phase else f"validation of {state['validated_role']}"
            reason = f"exit code {code}" if code != 0 else f"no {REPORT_FILE} written"
            raise PhaseFailedError(f"round {state['round']}: {what} failed ({reason}); its log: {log_path} "
                                   f"(last line: {last_line(log_path)!r}). Fix the cause and rerun with --resume.")
        self._record(state, step, phase, job, report, wall, cpu, log_path)

    @staticmethod
    def _skip_reason(state: dict, step: dict, phase: PhaseSpec | None) -> str | None:
        """A train step is skipped when its phase's build of this round reported `skip` (no rows to train on)."""
        if step["kind"] != "train":
            return None
        build_id = f"r{state['round']}-{phase.name}-build"
        return next((r.get("result", {}).get("skip") for r in reversed(state["steps"]) if r["id"] == build_id), None)

    def _record(self, state, step, phase, job, report, wall, cpu, log_path) -> None:
        gpus = int(report.get("gpus", 0))
        state["steps"].append({"id": step["id"], "round": state["round"], "kind": step["kind"],
                               "phase": phase.name if phase else "validate", "wall_s": round(wall, 3),
                               "cpu_s": round(cpu, 3), "gpus": gpus, "device_hours": wall * gpus / 3600,
                               "log": str(log_path), "result": report.get("result", {})})
        self._apply(state, step, phase, job, report)

    def _job(self, state: dict, step: dict, phase: PhaseSpec | None, step_dir: Path) -> dict:
        s = self.settings
        checkpoints = dict(state["checkpoints"])
        job = {"kind": step["kind"], "method": self.method.name, "round": state["round"], "step": step["id"],
               "phase": step["phase"], "recipe": os.path.abspath(s.recipe),
               "train_file": os.path.abspath(s.train_file),
               "validation_file": os.path.abspath(s.validation_file) if s.validation_file else None,
               "base_model": s.base_model, "checkpoints": checkpoints, "output_dir": str(step_dir.resolve()),
               "extra_args": list(s.extra_args), "seed": s.seed, "data": dict(state["data"])}
        if phase is not None:
            built = step["kind"] == "build"  # a build writes the phase's data; a train step reads it
            job["data_file"] = str(step_dir.resolve() / "train.jsonl") if built else state["data"].get(phase.name)
            job["start_model"] = checkpoints[phase.role]
            partner = checkpoints.get(phase.partner_role) if phase.partner_role else None
            job["partner"] = partner if partner and partner != s.base_model else None
        else:
            job["model"] = checkpoints[self.method.validated_role]
        return job

    def _build_here(self, state: dict, phase: PhaseSpec, job: dict, log_path: Path) -> int:
        ctx = BuildContext(state["round"], phase, job["checkpoints"], job["base_model"], job["train_file"],
                           job["data_file"], None, job["seed"], dict(job["data"]))
        try:
            counts = self.method.build_data(ctx)
        except (InputError, OSError, ValueError) as error:
            with open(log_path, "a") as log:
                log.write(f"error: {error}\n")
            return 1
        write_json({"ok": True, "gpus": 0, "result": counts}, Path(job["output_dir"]) / REPORT_FILE)
        return 0

    def _apply(self, state: dict, step: dict, phase: PhaseSpec | None, job: dict, report: dict) -> None:
        if step["kind"] == "build":
            state["data"][phase.name] = job["data_file"]
        elif step["kind"] == "train":
            state["checkpoints"][phase.role] = report["result"]["checkpoint"]
        else:
            score = report["result"].get("score")
            entry = {"round": state["round"], "score": score, "checkpoint": job["model"], "folder": job["output_dir"]}
            state["validations"].append(entry)
            if score is not None and (state["best"] is None or score > state["best"]["score"]):
                state["best"] = entry
            self.log(f"round {state['round']}: validation {score} (best {state['best'] and state['best']['score']})")
            self._early_stop(state)

    def _early_stop(self, state: dict) -> None:
        """`patience` validations in a row without a strict improvement on the best end the run (Video-Zero: 2)."""
        patience = (self.settings.settings or {}).get("patience")
        if not patience or state["best"] is None:
            return
        rounds = [v["round"] for v in state["validations"]]
        since_best = len(rounds) - 1 - rounds.index(state["best"]["round"])
        if since_best >= patience and state["round"] + 1 < state["rounds"]:
            state["done"] = True
            state["stopped_early"] = {"round": state["round"], "patience": patience,
                                      "best_round": state["best"]["round"]}
            self.log(f"round {state['round']}: {since_best} validations without improvement (patience {patience}): "
                     "stopping early")

    def _write_summary(self, state: dict) -> None:
        result = state["best"]["checkpoint"] if state["best"] else state["checkpoints"][state["validated_role"]]
        summary = {"method": state["method"], "rounds": state["rounds"], "result_checkpoint": result,
                   "best": state["best"], "validations": state["validations"], "totals": totals(state),
                   "per_phase": per_phase(state)}
        write_json(summary, self.output_dir / "summary.json")
        spent = summary["totals"]
        self.log(f"done: {state['validated_role']} checkpoint {result}; wall {spent['wall_s'] / 3600:.2f} h, "
                 f"device {spent['device_hours']:.2f} GPU-h, CPU {spent['cpu_hours']:.2f} h")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _read_report(step_dir: Path) -> dict | None:
    report = read_json(step_dir / REPORT_FILE)
    return report if report and report.get("ok") else None
