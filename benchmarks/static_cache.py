"""Static ablation on free text: how often are a prompt's tests reused across steps? (the cache-hit rate)

The bundled preference sample, a few steps, each prompt visited every step. The frozen SmolLM2-135M-Instruct (offline)
samples G answers per prompt (temperature 1.0, top-p 0.95, top-k 20, as rollouts of the initial policy), and the same
frozen model is the verifier of `EvidencePipeline(mode="static")`. Per step it prints the ordered answer pairs looked
up, those served from the store (hits: no construction, no validation), the hit rate, and what the hit rate would be
with the old semantics, keyed on the exact (normalized) answer pair.

    python -m benchmarks.static_cache                        # 4 prompts, G=4, 3 steps (minutes on a free CPU)
    python -m benchmarks.static_cache --prompts 8 --steps 4
"""

from __future__ import annotations

import argparse
import time

import torch

from rlce_trl.data import load_preference_sample
from rlce_trl.data.prompts import completion_text
from rlce_trl.evidence.answers import extract_answer, normalize_answer
from rlce_trl.evidence.construction import ordered_pairs
from rlce_trl.evidence.pipeline import EvidencePipeline, EvidenceSettings
from rlce_trl.evidence.prompts import render_context
from rlce_trl.models import smollm2_instruct
from rlce_trl.scoring import Group
from rlce_trl.verifiers import TransformersVerifier, load_frozen_model
from rlce_trl.verifiers.base import Request, Sampling


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rollout-tokens", type=int, default=32, help="max new tokens of a rollout")
    parser.add_argument("--test-tokens", type=int, default=48, help="max new tokens of a constructed test")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rollout = Sampling(temperature=1.0, top_p=0.95, top_k=20, max_tokens=args.rollout_tokens, n=args.generations)

    torch.manual_seed(args.seed)
    model, tokenizer = load_frozen_model(smollm2_instruct(), dtype=torch.float32)
    verifier = TransformersVerifier(model, tokenizer, batch_size=16)
    settings = EvidenceSettings(mode="static", construction_sampling=Sampling(1.0, 0.95, 20, args.test_tokens),
                                equivalence_max_tokens=160)
    pipeline = EvidencePipeline(verifier, settings)
    rows = load_preference_sample("train")[: args.prompts]
    seen_exact: set[tuple[str, str, str]] = set()
    total_lookups = total_hits = total_exact = 0
    print("step  lookups  hits  hit_rate  exact_key_hit_rate  distinct_answers  seconds")
    for step in range(args.steps):
        start = time.perf_counter()
        requests = [Request(messages=row["prompt"], sampling=rollout, stage="rollout") for row in rows]
        rollouts = verifier.generate(requests)
        groups = [Group(render_context(row["prompt"]), [completion_text(t) for t in reply.texts], key=row["id"])
                  for row, reply in zip(rows, rollouts, strict=True)]
        results, stats = pipeline.score(groups)
        exact = 0
        # the old semantics: only an identical (normalized) answer pair is reused
        for group, result in zip(groups, results, strict=True):
            first = [group.completions[result.assignment.index(k)] for k in range(len(result.answers))]
            raw = [normalize_answer(extract_answer(text) or "") for text in first]
            for i, j in ordered_pairs(len(raw)):
                exact += (group.prompt_key, raw[i], raw[j]) in seen_exact
                seen_exact.add((group.prompt_key, raw[i], raw[j]))
        lookups, hits = stats.extra["static_lookups"], stats.extra["static_cache_hits"]
        total_lookups, total_hits, total_exact = total_lookups + lookups, total_hits + hits, total_exact + exact
        rate, exact_rate = hits / max(lookups, 1), exact / max(lookups, 1)
        print(f"{step + 1:>4}  {lookups:>7}  {hits:>4}  {rate:>8.2f}  {exact_rate:>18.2f}"
              f"  {sum(stats.distinct_answers) / len(groups):>16.2f}  {time.perf_counter() - start:>7.1f}")
    print(f"all   {total_lookups:>7}  {total_hits:>4}  {total_hits / max(total_lookups, 1):>8.2f}"
          f"  {total_exact / max(total_lookups, 1):>18.2f}")
    classes = {key: len(c) for key, c in pipeline.static_classes.items()}
    print(f"answer classes per prompt after {args.steps} steps: {classes}")


if __name__ == "__main__":
    main()
