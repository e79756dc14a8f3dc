"""Under ZeRO-3 (`is_deepspeed_zero3_enabled()` stays true for the whole run) transformers' `generate` defaults to
`synced_gpus=True`, a per-token all-reduce over all ranks. The frozen verifier and the co-evolution partner are whole,
unsharded copies that each rank drives on its own groups: their `generate` calls must not synchronise, or two ranks
making different numbers of calls hang (reproduced: a timeout here before the fix)."""

import json
import os
import sys

import pytest
from launching import run_or_fail
from testing_utils import free_port

HERE = os.path.dirname(__file__)

pytestmark = pytest.mark.slow


def run_two_ranks(model_dir, out_dir, kind: str):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    tests = os.path.dirname(HERE)
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error",
               PYTHONPATH=os.pathsep.join(filter(None, [HERE, tests, env.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), os.path.join(HERE, "unsharded_generate_run.py"), str(model_dir),
           str(out_dir), kind]
    done = run_or_fail(cmd, env, timeout=240)  # before the fix: a hang (here a gloo timeout) in generate
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((out_dir / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert all(r["zero3"] for r in ranks)  # the condition that made generate synchronise
    assert [len(r["texts"]) for r in ranks] == [1, 3]
    for r in ranks:
        assert all(len(texts) == 2 and set(texts) <= {"yes", "no", "unknown"} for texts in r["texts"])


def test_text_verifier_and_partner_generate_independently_under_zero3(tiny_model_dir, tmp_path):
    pytest.importorskip("deepspeed")
    run_two_ranks(tiny_model_dir, tmp_path, "text")


@pytest.mark.vlm
def test_vision_language_verifier_generates_independently_under_zero3(tmp_path):
    pytest.importorskip("deepspeed")
    pytest.importorskip("torchvision")
    from testing_utils import build_tiny_vlm

    run_two_ranks(build_tiny_vlm(tmp_path / "vlm"), tmp_path, "vlm")
