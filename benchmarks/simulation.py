"""Simulated aggregate-verdict accuracy versus the number of composed tests, beside the paper's MOSEI / UR-FUNNY
points (section 4.3, Fig. 3 left), for independent tests and for tests whose error rate is shared within an example.

Each setting is one `rlce-trl analyze --simulate` process (`python -m rlce_trl.cli`); tables and PNGs go under
`--output_dir`, one folder per setting. Takes about 10 s per setting with the default 2,000 examples per error rate.

    python -m benchmarks.simulation --output_dir runs/simulation
    python -m benchmarks.simulation --output_dir runs/simulation --error_rates 0.35 0.4 0.45 --concentrations 2 8
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path


def run(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", default="runs/simulation", help="one folder per setting goes here")
    parser.add_argument("--error_rates", type=float, nargs="+", default=[0.2, 0.3, 0.4], help="validator error rates")
    parser.add_argument("--concentrations", type=float, nargs="*", default=[2.0],
                        help="per-example error ~ Beta(k e, k (1 - e)), besides independent tests")
    parser.add_argument("--trials", type=int, default=2000, help="examples per error rate")
    parser.add_argument("--rlce_tests_per_direction", type=int, default=6, help="tests per direction")
    parser.add_argument("--no_plots", action="store_true", help="tables only")
    args = parser.parse_args(argv)
    settings = [("independent", [])] + [(f"concentration_{c:g}", ["--concentration", str(c)])
                                        for c in args.concentrations]
    for name, extra in settings:
        out = Path(args.output_dir) / name
        print(f"\n## {name}", flush=True)
        code = subprocess.call([sys.executable, "-m", "rlce_trl.cli", "analyze", "--simulate", "--output_dir",
                                str(out),
                                "--trials", str(args.trials), "--rlce_tests_per_direction",
                                str(args.rlce_tests_per_direction), "--error_rates", *map(str, args.error_rates),
                                *extra, *(["--no_plots"] if args.no_plots else [])])
        if code:
            return code
    return 0


if __name__ == "__main__":
    raise SystemExit(run())
