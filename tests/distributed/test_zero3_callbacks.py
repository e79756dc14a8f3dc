"""The callbacks that generate with the policy (best-checkpoint validation, the test-time adaptation per-pass
evaluation) under DeepSpeed ZeRO-3 with two processes: the policy is sharded, so a `generate` on the main process
alone waits forever for the other (it hung before the fix); every process now makes the same calls. The best
checkpoint is saved complete (gathered), not the main process's shards."""

import json
import os
import sys
from pathlib import Path

import pytest
from launching import run_or_fail
from testing_utils import free_port

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

pytestmark = pytest.mark.slow


def test_validation_and_tta_callbacks_under_zero3_two_processes(tiny_model_dir, tmp_path):
    pytest.importorskip("deepspeed")
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1", TRANSFORMERS_VERBOSITY="error",
               PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), str(HERE.parent), env.get("PYTHONPATH")])))
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
           str(ROOT / "configs" / "accelerate" / "zero3.yaml"), "--num_processes", "2", "--mixed_precision", "no",
           "--main_process_port", str(free_port()), str(HERE / "zero3_callbacks_run.py"), tiny_model_dir, str(out)]
    done = run_or_fail(cmd, env, timeout=360, cwd=ROOT)  # about 90 s here; before the fix: a hang in generate
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [(r["policy_zero3"], r["steps"]) for r in ranks] == [([True, True], 2)] * 2  # ZeRO-3 when they ran
    # validation after each step, the same decisions on both ranks
    assert [h["step"] for h in ranks[0]["history"]] == [1, 2] and ranks[0]["history"] == ranks[1]["history"]
    assert (out / "validation" / "step-2" / "summary.json").exists()
    # the base model (pass 0, at on_train_begin) and the end of the one pass over the split
    passes = json.loads((out / "tta" / "passes.json").read_text())["passes"]
    assert [p["pass"] for p in passes] == [0, 1] and [p["pass"] for p in ranks[1]["passes"]] == [0, 1]
    for k in (0, 1):
        predictions = (out / "tta" / f"pass-{k}" / "predictions.jsonl").read_text().splitlines()
        assert len(predictions) == 3
    # the best checkpoint is complete: the weights the trainer saved (gathered) at that step, every tensor whole
    import torch
    from transformers import AutoModelForCausalLM

    best_step = json.loads((out / "best.json").read_text())["best_step"]
    best = AutoModelForCausalLM.from_pretrained(out / "best")
    same_step = AutoModelForCausalLM.from_pretrained(out / f"checkpoint-{best_step}")
    initial = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    saved, reference, untrained = best.state_dict(), same_step.state_dict(), initial.state_dict()
    assert saved.keys() == reference.keys() == untrained.keys()
    assert all(saved[k].shape == untrained[k].shape and torch.equal(saved[k], reference[k]) for k in saved)
    assert any(not torch.equal(saved[k], untrained[k]) for k in saved)  # trained weights, not the initial ones
    assert (out / "best" / "tokenizer_config.json").exists()
