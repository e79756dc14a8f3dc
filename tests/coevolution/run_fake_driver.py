"""Runs the real co-evolution driver (RLAC's loop) with the FAKE phase process, as a separate process the driver
tests can SIGKILL. Usage: run_fake_driver.py OUTPUT_DIR CORPUS VALIDATION ROUNDS [--resume]"""

import sys
from pathlib import Path

from rlce_trl.coevolution.driver import Coevolver, DriverSettings
from rlce_trl.coevolution.registry import get_method

FAKE = str(Path(__file__).with_name("fake_phase.py"))


def settings(output_dir, corpus, validation, rounds):
    return DriverSettings(recipe="recipe.yaml", train_file=corpus, validation_file=validation, output_dir=output_dir,
                          base_model="base-model", rounds=rounds, phase_command=[sys.executable, FAKE], seed=7)


if __name__ == "__main__":
    out, corpus, validation, rounds = sys.argv[1:5]
    driver = Coevolver(get_method("rlac", {}), settings(out, corpus, validation, int(rounds)), log=print)
    driver.run(resume="--resume" in sys.argv)
