"""The Elect election on simulated candidates calibrated to the Elect paper's Tables 3-4 (MVBench column).

Generative model [ours; next-capabilities §2.7]: 4-option rows; each row has a difficulty p ~ Beta(k 0.691, k 0.309)
(mean = Table 4's single-sample 69.1); a candidate is correct with probability p, else wrong, 60% of the wrong mass
on one distractor. Over T=8 frames with a hidden evidence set of 2-3 frames, correct candidates cite each evidence
frame with probability 0.8 and each other frame with 0.1; wrong ones cite 1-3 random frames. tau ~ Beta(5,2) and
rho ~ Beta(1,9) are independent of correctness; c ~ Beta(6,4) for correct and Beta(4,6) for wrong candidates. The
simulated referee calls a wrong winner "unsupported" (Delta = -S) with probability 0.5 and a right one with 0.05.
All settings see the same candidates (paired). The numbers guard the implementation; they are not claims about models.

    python -m benchmarks.elect_simulation                  # 5,000 rows, about a minute
    python -m benchmarks.elect_simulation --rows 1000 --concentration 1.5
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import time

from rlce_trl.elect import Candidate, ElectConfig, frame_sensitive_score, run_election

PAPER = {"single sample (K=1)": 69.1, "majority vote (adaptive)": 70.6, "Elect, adaptive": 72.9,
         "Elect, fixed K=8": 73.3, "w/o outlier trimming": 71.4, "frames only": 70.2, "w/o referee": 71.8}


def simulate_row(rng: random.Random, concentration: float, frames: int = 8, k_max: int = 8, conf_gap: float = 1.0):
    p = rng.betavariate(concentration * 0.691, concentration * 0.309)
    evidence = set(rng.sample(range(1, frames + 1), rng.choice([2, 3])))
    distractors = ["B", "C", "D"]
    rows = []
    for _ in range(k_max + 1):  # one spare for the referee's extra sample
        correct = rng.random() < p
        if correct:
            answer = "A"
            cited = {f for f in range(1, frames + 1) if rng.random() < (0.8 if f in evidence else 0.1)}
        else:
            answer = "B" if rng.random() < 0.6 else rng.choice(distractors[1:])
            cited = set(rng.sample(range(1, frames + 1), rng.choice([1, 2, 3])))
        tau, rho = rng.betavariate(5, 2), rng.betavariate(1, 9)
        conf = rng.betavariate(5 + conf_gap, 5 - conf_gap) if correct else rng.betavariate(5 - conf_gap, 5 + conf_gap)
        rows.append({"answer": answer, "frames": frozenset(cited), "tau": tau, "rho": rho, "conf": conf})
    referee_unsupported = {"right": rng.random() < 0.05, "wrong": rng.random() < 0.5}
    return rows, referee_unsupported


def score(c: dict, terms: tuple[str, ...]) -> float:
    parts = {"fs": frame_sensitive_score(len(c["frames"]), 0), "tt": c["tau"], "ar": 1 - c["rho"], "conf": c["conf"]}
    if terms == ("equal",):
        return 1.0
    return sum(parts[t] for t in terms) / len(terms)


def run_setting(rows, cfg: ElectConfig, terms=("fs", "tt", "ar", "conf"), referee=True):
    correct, ks = 0, 0
    for cands, unsupported in rows:
        pool = [Candidate(c["answer"], c["frames"] if cfg.use_frames else frozenset(), score(c, terms), c["conf"])
                for c in cands]

        def draw(i, pool=pool):
            return pool[i] if i < len(pool) else None

        def judge(election, unsupported=unsupported):
            wrong = election.winner != "A"
            return -election.answer_scores[election.winner] if unsupported["wrong" if wrong else "right"] else 0.0

        out = run_election(draw, cfg, referee=judge if referee else None, available=cfg.k_max)
        correct += out.answer == "A"
        ks += out.num_samples
    return 100 * correct / len(rows), ks / len(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--concentration", type=float, default=1.0, help="k of the row difficulty Beta")
    parser.add_argument("--conf-gap", type=float, default=0.25,
                        help="c ~ Beta(5+g, 5-g) for correct, Beta(5-g, 5+g) for wrong candidates "
                        "(g=1: the spec; 0.25 calibrated)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    rows = [simulate_row(rng, args.concentration, conf_gap=args.conf_gap) for _ in range(args.rows)]
    full = ElectConfig()
    settings = {
        "single sample (K=1)": (dataclasses.replace(full, k_init=1, k_max=1), {}),
        "majority vote (adaptive)": (dataclasses.replace(full, use_frames=False), {"terms": ("equal",)}),
        "Elect, adaptive": (full, {}),
        "Elect, fixed K=8": (dataclasses.replace(full, k_init=8), {}),
        "w/o outlier trimming": (dataclasses.replace(full, trim="none"), {}),
        "frames only": (full, {"terms": ("fs",)}),
        "w/o referee": (full, {"referee": False}),
        "Elect, trim=min4 [ours]": (dataclasses.replace(full, trim="min4"), {}),
    }
    start = time.perf_counter()
    results = {name: run_setting(rows, cfg, **kw) for name, (cfg, kw) in settings.items()}
    print(f"{args.rows} simulated rows, concentration {args.concentration}, conf gap {args.conf_gap}, "
          f"seed {args.seed} "
          f"({time.perf_counter() - start:.0f} s)\n")
    print("| setting | accuracy | avg K | paper MVBench |\n|---|---|---|---|")
    for name, (acc, k) in results.items():
        print(f"| {name} | {acc:.2f} | {k:.2f} | {PAPER.get(name, '–')} |")
    acc = {n: r[0] for n, r in results.items()}
    checks = {
        "single < majority < Elect adaptive <= Elect K=8": acc["single sample (K=1)"] < acc["majority vote (adaptive)"]
        < acc["Elect, adaptive"] <= acc["Elect, fixed K=8"],
        "w/o trimming < full": acc["w/o outlier trimming"] < acc["Elect, adaptive"],
        "frames only < full": acc["frames only"] < acc["Elect, adaptive"],
        "avg K in [2.5, 4]": 2.5 <= results["Elect, adaptive"][1] <= 4,
        "K=8 gain < adaptive gain": acc["Elect, fixed K=8"] - acc["Elect, adaptive"]
        < acc["Elect, adaptive"] - acc["single sample (K=1)"],
    }
    print()
    for name, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
