"""Stage batching vs one verifier call per request, on the transformers backend, measured side by side.

One RLCE step of B groups x G rollouts (every rollout a distinct free-text answer, the worst case: equivalence, then
K(K-1) construction and validation requests per group). The same step runs twice on the same frozen model: once as
the pipeline does it (one batched call per stage) and once with every request sent alone. Prints verifier calls,
generated tokens, wall time and the speed-up, for each G.

    python -m benchmarks.stage_batching                    # tiny random model (seconds)
    python -m benchmarks.stage_batching --model smollm2    # SmolLM2-135M-Instruct, offline (minutes)
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch

from rlce_trl.evidence.pipeline import EvidencePipeline, EvidenceSettings
from rlce_trl.scoring import Group
from rlce_trl.verifiers import TransformersVerifier, load_frozen_model
from rlce_trl.verifiers.base import Verifier

ANSWERS = ["a quiet cafe", "a loud bar", "a vegan bistro", "a steak house", "a picnic", "a food truck", "a sushi bar",
           "a home dinner"]


class OneCallPerRequest(Verifier):
    """The baseline: the same backend, but every request is its own call."""

    def __init__(self, inner: Verifier):
        super().__init__()
        self.inner = inner

    def _generate(self, requests):
        return [self.inner._generate([r])[0] for r in requests]


def make_groups(num_groups: int, g: int) -> list[Group]:
    return [
        Group(
            context=f"User: I am vegetarian and like calm places. Where should we eat tonight, option set {k}?",
            completions=[f"My pick: \\boxed{{{ANSWERS[i]}}}" for i in range(g)],
        )
        for k in range(num_groups)
    ]


def run(verifier: Verifier, groups, settings) -> tuple[int, int, int, float]:
    """(backend calls, requests, generated tokens, wall seconds) of one step."""
    torch.manual_seed(0)
    start = time.perf_counter()
    EvidencePipeline(verifier, settings).score(groups)
    wall = time.perf_counter() - start
    stats = verifier.stats
    calls = stats.requests if isinstance(verifier, OneCallPerRequest) else stats.calls
    return calls, stats.requests, stats.generated_tokens, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="tiny", help="'tiny', 'smollm2' or a model folder")
    parser.add_argument("--groups", type=int, default=2, help="B, rollout groups per step")
    parser.add_argument("--G", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--construction_max_tokens", type=int, default=32)
    args = parser.parse_args()

    if args.model == "tiny":
        from tests.testing_utils import build_tiny_model

        path = build_tiny_model(tempfile.mkdtemp() + "/tiny", hidden_size=64, num_heads=2)
    elif args.model == "smollm2":
        from rlce_trl.models import smollm2_instruct

        path = smollm2_instruct()
    else:
        path = args.model
    model, tokenizer = load_frozen_model(path, dtype=torch.float32)
    settings = EvidenceSettings(
        construction_sampling=EvidenceSettings().construction_sampling.__class__(
            temperature=1.0, top_p=0.95, top_k=20, max_tokens=args.construction_max_tokens),
        equivalence_max_tokens=64, tie_break_tests_per_direction=0,
    )
    run(TransformersVerifier(model, tokenizer), make_groups(1, 2), settings)  # warm-up, not measured
    print(f"model={args.model} B={args.groups} torch_threads={torch.get_num_threads()}")
    print(f"{'G':>3} {'mode':<16} {'calls':>6} {'requests':>9} {'gen_tokens':>11} {'wall_s':>8}")
    for g in args.G:
        groups = make_groups(args.groups, g)
        batched = TransformersVerifier(model, tokenizer, batch_size=args.batch_size)
        single = OneCallPerRequest(TransformersVerifier(model, tokenizer, batch_size=1))
        results = {}
        for name, verifier in (("stage-batched", batched), ("one-per-request", single)):
            calls, requests, tokens, wall = run(verifier, groups, settings)
            results[name] = wall
            print(f"{g:>3} {name:<16} {calls:>6} {requests:>9} {tokens:>11} {wall:>8.2f}")
        print(f"{g:>3} speed-up (one-per-request / stage-batched wall time): "
              f"{results['one-per-request'] / results['stage-batched']:.2f}x")


if __name__ == "__main__":
    main()
