"""The package's own error types for bad input: each message is one line (or a short list) that names what is wrong
and the fix. `rlce-trl` prints them as `error: <message>` and exits with status 2, with no traceback; any other
exception is a bug and keeps its traceback."""

from __future__ import annotations

import argparse
import difflib
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path


def did_you_mean(word: str, choices) -> str:
    """`: did you mean 'x'?` for the one of `choices` that `word` begins (`--out`: `--output_dir`), else the closest
    (difflib), or an empty string."""
    choices = list(choices)
    longer = [c for c in choices if c.startswith(word)]
    close = longer if len(longer) == 1 else difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f": did you mean {close[0]!r}?" if close else ""


def first_line(error: BaseException, limit: int = 300) -> str:
    """An error's first non-empty line, at most `limit` characters (its type name when the message is empty): what a
    counted-and-skipped failure records."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:limit]


def last_line(path) -> str:
    """A log file's last non-empty line, stripped, at most 300 characters (empty when it has none or cannot be read):
    what the error of a failed process quotes."""
    try:
        lines = [line.strip() for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError:
        return ""
    return next((line[:300] for line in reversed(lines) if line), "")


def print_error(message) -> None:
    """`error: <message>` on stderr, its newline included, in ONE write, then flushed: ranks of a launch that share
    one stderr (unbuffered under torchrun / `python -u`, where `print` writes the text and the newline separately)
    can then never join their lines."""
    sys.stderr.write(f"error: {message}\n")
    sys.stderr.flush()


def output_dir_problem(path) -> str | None:
    """Why a run cannot write into the folder `path` (`None` when it can), found before anything is created: it is a
    file, a folder above it is a file, or the folder (or the nearest one above that exists) takes no new file; that
    is tried with a temporary file, which also catches read-only file systems, where permissions say yes."""
    folder = Path(os.path.expanduser(os.fspath(path))).absolute()
    if folder.exists() and not folder.is_dir():
        return "is a file: pass a folder (new or existing)"
    above = folder
    while not above.exists():
        above = above.parent
    if not above.is_dir():
        return f"cannot be created: {above} is a file, not a folder"
    try:
        with tempfile.TemporaryFile(dir=above):
            pass
    except OSError as error:
        where = "is not writable" if above == folder else f"cannot be created in {above}"
        return f"{where} ({error.strerror}): pass a folder you can write to"
    return None


def output_dir_error(path) -> str | None:
    """`--output_dir '<path>' <problem>` ([`output_dir_problem`]), or `None` when a command can write there: the one
    wording of every command's check, made before anything is loaded or written."""
    problem = output_dir_problem(path)
    return f"--output_dir {os.fspath(path)!r} {problem}" if problem else None


def output_file_error(path, example: str) -> str | None:
    """`--output_file '<path>' ...` when a command cannot write the file `path` (`None` when it can, or none was
    given): it is a folder, or its folder does not exist. Checked before any work, like [`output_dir_error`]."""
    if not path:
        return None
    folder = os.path.dirname(path)
    if os.path.isdir(path):
        return f"--output_file {path!r} is a folder: pass a file path (e.g. {example})"
    if folder and not os.path.isdir(folder):
        return f"--output_file {path!r}: the folder {folder!r} does not exist; create it first"
    return None


def run_setting_problems(args) -> list[tuple[str, str]]:
    """Training settings that would fail or train nothing only after the models load, as `(key, problem)`: a learning
    rate <= 0, a `max_steps` (or number of epochs) that trains nothing, an output folder that is a file, cannot be
    created or is not writable. Checked by `RLCEGRPOConfig` (built in Python) and by the scripts' command line (which
    also names the recipe file a value came from)."""
    problems = []
    if args.learning_rate <= 0:
        problems.append(("learning_rate", f"{args.learning_rate:g}: a learning rate must be > 0 (the paper's recipes "
                                          "use 1e-6)."))
    if args.max_steps == 0 or (args.max_steps < 0 and args.num_train_epochs <= 0):
        key = "max_steps" if args.max_steps == 0 else "num_train_epochs"
        problems.append((key, f"{getattr(args, key):g} trains nothing: give max_steps >= 1 (optimizer steps), or "
                              "leave max_steps at -1 and num_train_epochs > 0."))
    if args.output_dir and (problem := output_dir_problem(args.output_dir)):
        problems.append(("output_dir", f"{args.output_dir!r} {problem}."))
    return problems


# argparse types for counts: a bad value is one line naming the range (every command uses them).


def bounded_int(low: int, high: int | None = None, name: str | None = None):
    """argparse type: a whole number in [low, high] (`high` None: no upper bound)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low or (high is not None and value > high):
            wanted = f"{low} or more" if high is None else f"{low} to {high:,}".replace(",", "_")
            raise argparse.ArgumentTypeError(f"{value}: use {wanted}")
        return value

    parse.__name__ = name or f"int in [{low}, {high}]"
    return parse


#: argparse type: a whole number >= 1 (counts, sizes, batch sizes).
positive_int = bounded_int(1, name="positive_int")
#: argparse type: a whole number >= 0 (seeds, top-k, optional counts where 0 means none).
nonnegative_int = bounded_int(0, name="nonnegative_int")


def leave_process_group() -> None:
    """Before a launched rank exits on bad input: destroy the process group if one was set up (TRL's config sets it
    up while the command line is parsed), so that gloo's worker threads do not abort the exit. Every rank checks the
    same input and stops at the same point, so none is left waiting in a collective."""
    dist = sys.modules.get("torch.distributed")  # never imported here: a command without torch stays without it
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


class InputError(ValueError):
    """A file, row, flag or setting the user gave cannot be used as it is; the message names the fix."""


class MissingInputError(InputError, FileNotFoundError):
    """A file or folder the user named does not exist (or is not what it should be); the message names the fix."""


def raise_problems(problems) -> None:
    """One [`InputError`] naming every problem a command's check found (`; `-joined, ending in a period), if any;
    `None` entries (checks that found nothing, like [`output_dir_error`]'s) are skipped."""
    if problems := [problem for problem in problems if problem]:
        raise InputError("; ".join(problems) + ".")


# -- Ctrl-C ----------------------------------------------------------------------------------------------------------
#: Ctrl-C presses seen by the handler [`watch_interrupts`] installs (a library that catches KeyboardInterrupt while a
#: model loads cannot make one vanish: the trainer checks this before its first step).
_INTERRUPTS: list[float] = []


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during training: what was saved. `checkpoint`: the folder of the last finished step (`None`: nothing
    was saved, e.g. before the first step finished); `step`: that step; `output_dir`: the run's folder; `report`:
    the run report's page, when one was written."""

    def __init__(self, checkpoint: str | None = None, step: int = 0, output_dir: str | None = None):
        super().__init__(checkpoint or "")
        self.checkpoint, self.step, self.output_dir, self.report = checkpoint, step, output_dir, None


def watch_interrupts() -> None:
    """Install a SIGINT handler that records each Ctrl-C before raising KeyboardInterrupt as Python's own does; only
    where Python's default handler is in place (the main thread, no handler of the user's), and the record starts
    empty."""
    _INTERRUPTS.clear()
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        return

    def on_sigint(signum, frame):
        _INTERRUPTS.append(time.monotonic())
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)


def raise_if_interrupted() -> None:
    """KeyboardInterrupt if a Ctrl-C was recorded since [`watch_interrupts`]: one pressed while models loaded ends
    the run even if a library swallowed it. Raising it uses the record up: a second `train()` in the same
    process (a notebook) starts afresh."""
    if _INTERRUPTS:
        _INTERRUPTS.clear()
        raise KeyboardInterrupt


def interrupt_message(error: BaseException) -> str:
    """What `rlce-trl` and the training scripts print on Ctrl-C: where the run was saved and that the same command
    resumes it, or that nothing was saved."""
    checkpoint = getattr(error, "checkpoint", None)
    if checkpoint:
        report = getattr(error, "report", None)
        saved = f"checkpoint {checkpoint}" + (f", report {report}" if report else "")
        return (f"interrupted after step {error.step}: saved {saved} (evidence trail and metrics in "
                f"{error.output_dir}); rerun the same command to resume at step {error.step + 1}")
    return "interrupted: nothing was saved (no training step had finished); rerun the same command to start again"
