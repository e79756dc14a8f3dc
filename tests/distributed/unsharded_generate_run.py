"""Launched by test_unsharded_generate.py with `python -m torch.distributed.run --nproc_per_node 2` (gloo, CPU).

ZeRO-3 is switched on as the trainer switches it on (a live `HfDeepSpeedConfig`, so `is_deepspeed_zero3_enabled()`
is true), then each rank asks a frozen verifier built by `frozen_verifier` (the factory of the verifier's own
checkpoint and of the co-evolution partner) a DIFFERENT number of requests through `model.generate`, as ranks scoring
different groups do. With transformers' default `synced_gpus=True` the per-token all-reduces of the two ranks do not
line up. Each rank writes what it got; the launcher's timeout turns a hang into a failure.

    unsharded_generate_run.py MODEL_DIR OUT_DIR {text,vlm}
"""

import datetime
import json
import os
import sys

import torch
import torch.distributed as dist


def main(model_dir: str, out_dir: str, kind: str) -> None:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    from transformers.integrations import HfDeepSpeedConfig
    from transformers.integrations.deepspeed import is_deepspeed_zero3_enabled

    ds_config = HfDeepSpeedConfig({"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 1})
    assert is_deepspeed_zero3_enabled()

    from rlce_trl.verifiers.base import Request, Sampling
    from rlce_trl.verifiers.from_config import frozen_verifier

    torch.manual_seed(rank)
    verifier = frozen_verifier(model_dir, vision_language=kind == "vlm", dtype=torch.float32, batch_size=1)
    # sampled and constrained: answered through `model.generate` by both backends (one call per request here)
    sampling = Sampling(max_tokens=6, temperature=1.0, top_p=1.0, n=2)
    requests = [
        Request(messages=[{"role": "user", "content": f"the user said food {k}"}], sampling=sampling,
                choices=("yes", "no", "unknown"), stage="validation")
        for k in range(1 + 2 * rank)  # rank 0: one generate call, rank 1: three
    ]
    replies = verifier.generate(requests)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "texts": [r.texts for r in replies], "zero3": is_deepspeed_zero3_enabled()}, f)
    del ds_config
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:4])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # as lockstep_run.py: past gloo's teardown, which can abort a finished process at exit
