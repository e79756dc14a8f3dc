"""The training scripts, installed with the package (as TRL keeps `trl/scripts/`): entry points only.

- `train_prefeval`: RLCE on PrefEval or the bundled preference sample (`python -m rlce_trl.scripts.train_prefeval`);
- `train_hba`: RLCE on the Human Behavior Atlas video tasks (`python -m rlce_trl.scripts.train_hba`);
- `train_elect`: the Elect rewards on the numbered-evidence task (`python -m rlce_trl.scripts.train_elect`).

Each builds its task's rows and runs the one training pipeline of the library (`rlce_trl.training`); this module holds
their shared `__main__` ([`run_script`]). The `examples/train_*.py` of a clone are thin wrappers around them.
"""

from __future__ import annotations

import sys

from ..errors import InputError, interrupt_message, leave_process_group, print_error, watch_interrupts


def run_script(make_parser, main) -> None:
    """A training script's `__main__`: parse the command line (and its `--config` recipe), run `main`; bad input
    (while parsing or later, e.g. every row filtered out) is one `error:` line and exit status 2 on every rank."""
    exit_on_bad_input(lambda: main(*make_parser().parse_args_and_config()))


def exit_on_bad_input(body):
    """`body()`, except that bad input ([`InputError`], an unreachable verifier) ends the process with one
    `error: <message>` line (scrubbed of credentials) and exit status 2, with no traceback: what `rlce-trl` does,
    for the scripts run as `python examples/<script>.py` or `python -m rlce_trl.scripts.<script>`."""
    from ..verifiers.base import VerifierUnavailableError

    watch_interrupts()
    try:
        return body()
    except KeyboardInterrupt as error:  # Ctrl-C: where the run was saved and how to resume, no traceback
        print(interrupt_message(error), file=sys.stderr)
        raise SystemExit(130) from None
    except (InputError, VerifierUnavailableError) as error:
        from ..credentials import scrub_message

        leave_process_group()
        print_error(scrub_message(error))
        raise SystemExit(2) from None
