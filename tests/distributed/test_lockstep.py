"""`rlce_trl.evaluation.lockstep.run_on_main` with two processes whose `generate` synchronises every token (ZeRO-3 on):
the main process evaluates, the other repeats each of its `generate` calls, and an error on the main process is raised
on both (nobody is left waiting in a collective)."""

import json
import os
import sys

import pytest
from launching import run_or_fail
from testing_utils import free_port

HERE = os.path.dirname(__file__)

pytestmark = pytest.mark.slow


def two_ranks(model_dir, out_dir, mode):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error",
               PYTHONPATH=os.pathsep.join(filter(None, [HERE, os.path.dirname(HERE), env.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), os.path.join(HERE, "lockstep_run.py"), str(model_dir), str(out_dir),
           mode]
    done = run_or_fail(cmd, env, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads((out_dir / f"rank{r}.json").read_text()) for r in (0, 1)]


@pytest.fixture
def deepspeed():
    pytest.importorskip("deepspeed")


def test_the_other_rank_repeats_every_generate_call(deepspeed, tiny_model_dir, tmp_path):
    main, other = two_ranks(tiny_model_dir, tmp_path, "ok")
    assert main["collective"] and other["collective"]
    assert len(main["result"]) == 3 and other["result"] is None  # the main process's answers, nothing elsewhere
    assert main["calls"] == other["calls"] == [2, 1]  # the same batches: 3 prompts in batches of 2
    assert main["generate_restored"]


def test_an_error_on_the_main_process_is_raised_on_every_process(deepspeed, tiny_model_dir, tmp_path):
    main, other = two_ranks(tiny_model_dir, tmp_path, "fail")
    assert main["error"] == "ValueError: a judge error"
    assert other["error"].startswith("RuntimeError: The main process failed while evaluating (ValueError: a judge")
    assert main["calls"] == other["calls"] == [2, 1] and main["generate_restored"]
