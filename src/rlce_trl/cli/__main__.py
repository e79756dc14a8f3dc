"""`python -m rlce_trl.cli ...` (e.g. under `accelerate launch -m rlce_trl.cli train ...`): the `rlce-trl` command."""

import sys

from . import main

sys.exit(main())
