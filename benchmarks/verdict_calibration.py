"""Verdict quality of a real verifier on the built-in claim set: default vs calibrated verdicts, held-out half.

    python -m benchmarks.verdict_calibration [--model smollm2-135m-instruct] [--prompts p.json] [--coactive 4]

Fits on the calibration half (50 claims), reports on the held-out half (50 claims; true yes-rate 0.40):
- `default`: the argmax verdict (what training reads today);
- `prior`: contextual calibration only (content-free prior of this prompt template);
- `band`: the "unknown" band on the yes/no margin only;
- `prior+band`: both;
- with `--coactive N`: the coactive calibrator's best prompt after N few-shot revisions (default verdicts).
Each row: accuracy, Cohen's kappa and yes-rate with 95% bootstrap CIs, and the paired-bootstrap CI of the accuracy
and kappa differences to `default` (the same resampled claims for both).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time


def paired_difference(pred_a, pred_b, gold, metric, resamples=1000, seed=0):
    rng = random.Random(seed)
    n, draws = len(gold), []
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        g = [gold[i] for i in idx]
        d = metric([pred_b[i] for i in idx], g) - metric([pred_a[i] for i in idx], g)
        if not math.isnan(d):
            draws.append(d)
    draws.sort()
    return draws[int(0.025 * len(draws))], draws[min(int(0.975 * len(draws)), len(draws) - 1)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--prompts", default=None)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--coactive", type=int, default=0, help="Few-shot revisions to try (0: skip the loop).")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--save_calibration", default=None, help="Write the prior+band calibration here (JSON).")
    args = parser.parse_args(argv)

    from rlce_trl.calibration.agreement import (
        ask,
        content_free_prior,
        fit_calibration,
        read_verdicts,
    )
    from rlce_trl.calibration.cases import preference_claims, split_cases
    from rlce_trl.calibration.metrics import accuracy, alignment, cohen_kappa
    from rlce_trl.evidence.prompt_set import VerifierPrompts, load_prompts
    from rlce_trl.models import resolve_model
    from rlce_trl.verifiers.transformers_backend import TransformersVerifier, load_frozen_model

    start = time.perf_counter()
    model, tokenizer = load_frozen_model(resolve_model(args.model), dtype="float32")
    verifier = TransformersVerifier(model, tokenizer, batch_size=args.batch_size)
    prompts = load_prompts(args.prompts) if args.prompts else VerifierPrompts()
    cases = preference_claims()
    cal, held = split_cases(cases, "calibration"), split_cases(cases, "held-out")
    replies = ask(verifier, prompts, cal + held)
    cal_replies, held_replies = replies[: len(cal)], replies[len(cal) :]
    prior = content_free_prior(verifier, prompts, [c.context for c in cal])
    fit = {"replies": cal_replies, "prior": prior}
    variants = {
        "default": None,
        "prior": fit_calibration(verifier, prompts, cal, band=False, **fit),
        "band": fit_calibration(verifier, prompts, cal, contextual=False, **fit),
        "prior+band": fit_calibration(verifier, prompts, cal, **fit),
    }
    both = variants["prior+band"]
    gold = [c.label for c in held]
    predictions = {name: read_verdicts(held_replies, cal_)[0] for name, cal_ in variants.items()}
    if args.coactive:
        from rlce_trl.calibration.calibrator import CoactiveCalibrator, few_shot_proposer

        calibrator = CoactiveCalibrator(verifier, [few_shot_proposer(cal)], max_versions=args.coactive, min_gain=0.0)
        best, history = calibrator.run(prompts, cal)
        for step in history:
            print(step.line())
        predictions[f"coactive({best.version})"] = read_verdicts(ask(verifier, best, held))[0]
    print(
        f"\nmodel {args.model}, prompt version {prompts.version}; fitted on {len(cal)} claims, held-out {len(held)} "
        f"(true yes-rate {sum(g == 'yes' for g in gold) / len(gold):.2f})"
    )
    print(f"prior (content-free claims) { {k: round(v, 3) for k, v in prior.items()} }; band {both.band:.3f}")
    header = (
        f"| {'verdicts':<22} | accuracy [95% CI] | kappa [95% CI] | yes-rate [95% CI] | d accuracy | d kappa "
        "| yes/no/unknown |"
    )
    print("\n" + header + "\n|" + "---|" * 7)
    base = predictions["default"]
    for name, pred in predictions.items():
        a = alignment(name, pred, gold, resamples=args.resamples)
        if name == "default":
            d_acc = d_kappa = "-"
        else:
            lo, hi = paired_difference(base, pred, gold, accuracy, args.resamples)
            d_acc = f"{a.accuracy.value - accuracy(base, gold):+.2f} [{lo:+.2f}, {hi:+.2f}]"
            lo, hi = paired_difference(base, pred, gold, cohen_kappa, args.resamples)
            d_kappa = f"{a.kappa.value - cohen_kappa(base, gold):+.2f} [{lo:+.2f}, {hi:+.2f}]"
        counts = "/".join(str(a.verdicts.get(v, 0)) for v in ("yes", "no", "unknown"))
        print(f"| {name:<22} | {a.accuracy} | {a.kappa} | {a.yes_rate} | {d_acc} | {d_kappa} | {counts} |")
    if args.save_calibration:
        both.save(args.save_calibration)
    print(
        f"\n{verifier.stats.requests} verifier requests in {verifier.stats.calls} calls; "
        f"{time.perf_counter() - start:.0f} s in all"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
