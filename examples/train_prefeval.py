# Copyright the rlce-trl developers. Licensed under the Apache License, Version 2.0.
"""The script a clone runs: `rlce_trl.scripts.train_prefeval` (installed with the package, also reachable as
`rlce-trl train --config <recipe>`). See that module for the data options.

    accelerate launch --config_file configs/accelerate/zero3.yaml examples/train_prefeval.py \
        --config configs/<recipe>.yaml
"""

from rlce_trl.scripts import run_script
from rlce_trl.scripts.train_prefeval import main, make_parser

if __name__ == "__main__":
    run_script(make_parser, main)
