"""Shared by the entry-point tests: load the example scripts as modules, run them in-process or under a launcher."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from testing_utils import free_port

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES, CONFIGS = ROOT / "examples", ROOT / "configs"
HERE = Path(__file__).resolve().parent

# Overrides that shrink a recipe to a tiny CPU run (the tiny word-level model of tests/testing_utils.py).
TINY = ["--max_completion_length", "8", "--rlce_construction_max_tokens", "16", "--rlce_validation_max_tokens", "4",
        "--rlce_equivalence_max_tokens", "8", "--learning_rate", "0.1", "--per_device_train_batch_size", "4"]


def load_example(name: str):
    """examples/<name>.py as a module (they are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1", TRANSFORMERS_VERBOSITY="error",
               PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), str(ROOT / "tests"), env.get("PYTHONPATH")])))
    env.update(extra)
    return env


def launch(launcher: list[str], script_args: list[str], env: dict, timeout: int = 900):
    """Run tests/entrypoints/run_example.py under `launcher` (e.g. torch.distributed.run); returns the process."""
    cmd = [*launcher, str(HERE / "run_example.py"), *script_args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False)


def torchrun(nproc: int) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc), "--master_addr",
            "127.0.0.1", "--master_port", str(free_port())]
