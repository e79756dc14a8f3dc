# Copyright the rlce-trl developers. Licensed under the Apache License, Version 2.0.
"""The script a clone runs: `rlce_trl.scripts.train_elect` (installed with the package, also reachable as
`rlce-trl train --config elect_numbered_evidence`). See that module for the options.

    python examples/train_elect.py --gate gold --output_dir runs/elect_gold
"""

from rlce_trl.scripts.train_elect import main_cli

if __name__ == "__main__":
    main_cli()
