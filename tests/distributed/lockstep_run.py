"""Launched by test_lockstep.py with `python -m torch.distributed.run --nproc_per_node 2` (gloo, CPU).

ZeRO-3 is switched on (a live `HfDeepSpeedConfig`), so transformers' `generate` synchronises every token over both
ranks, as it does on a sharded policy. Rank 0 evaluates through `run_on_main` (two batches of different prompts, then
optionally an error); rank 1 only follows. Each rank writes what it saw.

    lockstep_run.py MODEL_DIR OUT_DIR {ok,fail}
"""

import datetime
import json
import os
import sys

import torch.distributed as dist


def main(model_dir: str, out_dir: str, mode: str) -> None:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.integrations import HfDeepSpeedConfig

    from rlce_trl.evaluation.lockstep import generation_is_collective, run_on_main
    from rlce_trl.generation.generators import TransformersGenerator

    model = AutoModelForCausalLM.from_pretrained(model_dir)  # whole (loaded before ZeRO-3 is on: no zero.Init)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    ds_config = HfDeepSpeedConfig({"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 1})
    calls = []
    generate = model.generate

    def counted(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape[0] if "input_ids" in kwargs else None)
        return generate(*args, **kwargs)

    model.generate = counted  # an instance attribute already there: run_on_main must keep it

    def evaluate():
        generator = TransformersGenerator(model, tokenizer, max_new_tokens=4, batch_size=2)
        texts = generator([[{"role": "user", "content": f"the user said {w}"}] for w in ("yes", "no", "food")])
        if mode == "fail":
            raise ValueError("a judge error")
        return texts

    record = {"rank": rank, "collective": generation_is_collective(model)}
    try:
        record["result"] = run_on_main(model, evaluate)
    except Exception as error:  # noqa: BLE001 - what each rank raised is the point
        record["error"] = f"{type(error).__name__}: {error}"
    record["calls"] = calls
    record["generate_restored"] = model.generate is counted
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(record, f)
    del ds_config
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:4])
    # What each rank saw is on disk and the group is destroyed: leave without the interpreter's teardown, where gloo's
    # worker threads can still be joined by static destructors and abort the process ("terminate called without an
    # active exception", SIGABRT) once in a while on a loaded machine; that is torch's exit, not what this test checks.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
