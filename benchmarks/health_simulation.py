"""The training-health monitor on scripted policies: detection delay after onset and false alarms on healthy steps.

Each simulated run hands `rlce_trl.health.HealthMonitor.add` (the code the trainer's callback runs) one step of group
summaries at a time: B prompts per step, G rollouts per prompt, K closed labels (or free-text answers), with a
scripted policy and a scripted verifier. A "step" is what the monitor reads as one record: one generation batch (in
the trainer, one every `steps_per_generation` optimizer steps). B defaults to 48, the prompts per generation batch
of the paper's PrefEval recipe (`configs/prefeval_rlce.yaml`; MOSEI's has 320, IntentQA's 96); `--groups 8` is the
small-batch case.

- `healthy`: accuracy rises slowly (0.35-0.5 at the start, up to +0.2 by the end), per-prompt difficulty, a base
  model prior that wrong answers lean towards, rollouts without an answer (a share drawn per run in 0.02-0.3, varied
  per prompt by x0.5-1.5). RLCE's verified answer is the true label with probability 0.7 when a rollout gives it,
  else an answer drawn in proportion to its votes; a tenth of comparable groups end in a tie (no reward). Verdicts:
  a test for a correct answer is yes/no/unknown with 0.6/0.25/0.15, for a wrong one 0.3/0.5/0.2. TTRL rewards the
  majority (first on a tie).
- `within_group`: from the onset, over 3 steps, a group becomes unanimous with probability rising to 0.9.
- `cross_prompt`: from the onset, over 3 steps, a rollout answers one fixed label with probability rising to 0.85.
- `cross_prompt_text`: the same on free text (each prompt's answers are distinct sentences; the collapse answer is
  one sentence for every prompt).
- `yes_drift` (RLCE): from the onset, over 3 steps, every verdict's probability of "yes" rises by 0.35.
- `stops_answering`: from the onset, over 3 steps, a rollout gives no answer with probability rising to 0.9
  (garbled or truncated completions).
- `entrenchment` (RLCE): from the ramp start, over 20 steps, the probability that the verified answer is simply the
  group majority rises from 0 to 1; the *onset* is the step where it reaches 0.5 (half the verified answers copy
  the vote). The drift is slow against the noise of a step: at 8 prompts per step about 4 groups a step are
  eligible, so one step's verified-majority share has a standard error of about 0.2 (the bench prints where the
  expected drift exceeds it).

Healthy steps are the checked steps (after the warmup and the first window) of the healthy runs, and those of a
failure run before its failure starts (for `entrenchment`, the ramp start: the ramp steps before the onset, where the
verifier already copies the vote up to half the time, are neither healthy nor a detection). A rule's false-alarm
rate is the share of the healthy steps it was checked on where it fires (also printed for the healthy runs alone);
a run's detection delay is the first step at or after the onset on which the scenario's rule fires, minus the onset
(a rule that never fires within the run counts as missed).

Thresholds are tuned on the tuning seeds (per rule, the least sensitive candidate whose false-alarm rate stays below
`--tune-fa` and whose 95th-percentile delay reaches `--tune-target`, else the one with the smallest 95th-percentile
delay and then the fewest false alarms; for the slow entrenchment rule, under `--tune-fa-entrenchment`, the one that
flags the most runs within `--tune-target` + 1 steps), then the thresholds the package ships (`HealthThresholds()`
defaults) are reported on the held-out seeds.

    python -m benchmarks.health_simulation                      # 48 prompts x 4 rollouts per step
    python -m benchmarks.health_simulation --groups 8           # the small-batch case
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import time
import zlib
from collections import Counter

from rlce_trl.health import (
    GroupSummary,
    HealthMonitor,
    HealthThresholds,
    StepRecord,
    evaluate_rules,
    pooled,
)

SCENARIOS = {  # scenario -> {method: the rules that must flag it}
    "healthy": {"rlce": (), "ttrl": ()},
    "within_group": {"rlce": ("within_group_collapse",),
                     # TTRL rewards a unanimous group: the reward rises while comparisons vanish
                     "ttrl": ("within_group_collapse", "reward_signal_divergence")},
    "cross_prompt": {"rlce": ("cross_prompt_collapse",), "ttrl": ("cross_prompt_collapse",)},
    "cross_prompt_text": {"rlce": ("cross_prompt_collapse",), "ttrl": ("cross_prompt_collapse",)},
    "yes_drift": {"rlce": ("verifier_drift",)},
    "stops_answering": {"rlce": ("answer_loss",), "ttrl": ("answer_loss",)},
    "entrenchment": {"rlce": ("entrenchment",)},
}
RAMP = 3
ENTRENCH_RAMP = 20
TIE = 0.1  # RLCE: share of comparable groups whose tests end in a tie (no verified answer, no reward)
VOCAB = [f"w{i}" for i in range(300)]
COLLAPSE_TEXT = "i am not sure what the user wants here"


@dataclasses.dataclass
class Sim:
    scenario: str
    method: str
    seed: int
    groups: int = 8
    generations: int = 4
    labels: int = 4
    steps: int = 60

    def __post_init__(self):
        self.rng = random.Random(zlib.crc32(f"{self.scenario}/{self.method}/{self.seed}".encode()))
        rng = self.rng
        self.p0 = rng.uniform(0.35, 0.5)
        self.p1 = self.p0 + rng.uniform(0.0, 0.2)
        self.prior = rng.randrange(self.labels)  # the base model's favourite wrong label
        self.collapse_label = rng.randrange(self.labels)
        self.silent = rng.uniform(0.02, 0.3)  # the share of rollouts without an answer, this run's
        if self.scenario == "entrenchment":
            self.ramp_start = rng.randint(5, 25)
            self.onset = self.ramp_start + ENTRENCH_RAMP // 2
            self.start = self.ramp_start + 1  # the first step whose verified answers copy the vote at all
        else:
            self.onset = rng.randint(15, 35) if self.scenario != "healthy" else None
            self.start = self.onset  # the first step the scripted failure shows
        self.closed = self.scenario != "cross_prompt_text"

    def level(self, step: int, ramp: int = RAMP) -> float:
        """0 before the onset, rising linearly to 1 over `ramp` steps."""
        if self.onset is None or step < self.onset:
            return 0.0
        return min(1.0, (step - self.onset + 1) / ramp)

    def entrenched(self, step: int) -> float:
        if self.scenario != "entrenchment":
            return 0.0
        return min(1.0, max(0.0, (step - self.ramp_start) / ENTRENCH_RAMP))

    def answer_text(self, prompt: int, label: int) -> str:
        rng = random.Random(prompt * 1000 + label)
        return " ".join(rng.sample(VOCAB, 6))

    def group(self, step: int, prompt: int) -> GroupSummary:
        rng, k, g = self.rng, self.labels, self.generations
        truth = rng.randrange(k)
        accuracy = self.p0 + (self.p1 - self.p0) * step / self.steps + 0.3 * (rng.betavariate(2, 2) - 0.5)
        accuracy = min(0.95, max(0.05, accuracy))
        silent = self.silent * rng.uniform(0.5, 1.5)

        def sample() -> int | None:
            if rng.random() < silent:
                return None
            if rng.random() < accuracy:
                return truth
            wrong = [label for label in range(k) if label != truth]
            return self.prior if self.prior != truth and rng.random() < 0.4 else rng.choice(wrong)

        labels = [sample() for _ in range(g)]
        if self.scenario == "within_group" and rng.random() < 0.9 * self.level(step):
            mode = truth if rng.random() < accuracy else rng.choice([x for x in range(k) if x != truth])
            labels = [mode] * g
        if self.scenario == "stops_answering":
            labels = [None if rng.random() < 0.9 * self.level(step) else x for x in labels]
        if self.scenario in ("cross_prompt", "cross_prompt_text"):
            labels = [self.collapse_label if rng.random() < 0.85 * self.level(step) else x for x in labels]
        if self.closed:
            answers = [None if x is None else f"label{x}" for x in labels]
            correct = f"label{truth}"
        else:
            collapsed = self.scenario == "cross_prompt_text" and self.level(step) > 0
            answers = [None if x is None else (COLLAPSE_TEXT if collapsed and x == self.collapse_label
                                               else self.answer_text(step * 1000 + prompt, x)) for x in labels]
            correct = self.answer_text(step * 1000 + prompt, truth)
        counts = Counter(a for a in answers if a is not None)
        distinct = list(counts)
        majority = None
        top = counts.most_common(2)
        if top and (len(top) == 1 or top[0][1] > top[1][1]):
            majority = top[0][0]
        verdicts: Counter = Counter()
        if self.method == "ttrl":
            winner = top[0][0] if top else None
        elif len(distinct) < 2:
            winner = None  # RLCE: a single answer (or none) gets no verification reward
        else:
            for favoured in distinct:  # one test per direction of every pair, plus tie-break tests sometimes
                for _ in range((len(distinct) - 1) * (2 if rng.random() < 0.3 else 1)):
                    verdicts[self.verdict(favoured == correct, step)] += 1
            if majority is not None and rng.random() < self.entrenched(step):
                winner = majority
            elif rng.random() < TIE:
                winner = None  # a tie that the extra tests did not break
            elif correct in counts and rng.random() < 0.7:
                winner = correct
            else:
                winner = rng.choices(distinct, weights=[counts[a] for a in distinct])[0]
        rewards = [None] * g if winner is None else [float(a is not None and a == winner) for a in answers]
        return GroupSummary(answers=answers, rewards=rewards, verified_answer=winner, verdicts=verdicts,
                            closed=self.closed)

    def verdict(self, correct: bool, step: int) -> str:
        yes, no, unknown = (0.6, 0.25, 0.15) if correct else (0.3, 0.5, 0.2)
        if self.scenario == "yes_drift":
            shift = 0.35 * self.level(step)
            yes, no, unknown = yes + shift, no * (1 - shift / (no + unknown)), unknown * (1 - shift / (no + unknown))
        return self.rng.choices(("yes", "no", "unknown"), weights=(yes, no, unknown))[0]

    def run(self, warmup: int, window: int) -> list[tuple[int, tuple]]:
        """Every checked step as (step, (window metrics, reference, logged)) for `evaluate_rules`."""
        monitor = HealthMonitor(self.method, warmup=warmup, window=window)
        out = []
        for step in range(1, self.steps + 1):
            monitor.last_inputs = None
            monitor.add(StepRecord(step, [self.group(step, p) for p in range(self.groups)]))
            if monitor.last_inputs is not None:
                out.append((step, monitor.last_inputs))
        return out


def simulate(seeds, args) -> list[tuple[Sim, list]]:
    runs = []
    for scenario, methods in SCENARIOS.items():
        for method in methods:
            for seed in seeds:
                sim = Sim(scenario, method, seed, args.groups, args.generations, args.labels, args.steps)
                runs.append((sim, sim.run(args.warmup, args.window)))
    return runs


def firing(run, method: str, t: HealthThresholds) -> dict[int, dict[str, bool]]:
    """Per checked step, every rule checked there and whether it fired."""
    return {step: {c.rule: c.fired for c in evaluate_rules(*inputs, method, t)} for step, inputs in run}


def evaluate(runs, t: HealthThresholds) -> dict:
    """False alarms per rule (and any rule) on the healthy steps where the rule was checked; delays per (scenario,
    method). Healthy steps: every checked step of a healthy run, and of a failure run before its failure starts
    (`Sim.start`); `healthy_runs`: the same over the healthy runs alone."""
    total = {"steps": Counter(), "false": Counter()}  # per rule: healthy steps it was checked on, and fired on
    alone = {"steps": Counter(), "false": Counter()}
    healthy_runs, runs_with_alarm = 0, 0
    delays: dict[tuple[str, str, str], list[int | None]] = {}
    for sim, run in runs:
        fired = firing(run, sim.method, t)
        pre = [s for s in fired if sim.onset is None or s < sim.start]
        for counts in (total, alone) if sim.onset is None else (total,):
            for s in pre:
                counts["steps"].update(fired[s].keys())
                counts["false"].update(rule for rule, hit in fired[s].items() if hit)
                counts["steps"]["any"] += 1
                counts["false"]["any"] += any(fired[s].values())
        if sim.onset is None:
            healthy_runs += 1
            runs_with_alarm += any(any(fired[s].values()) for s in pre)
            continue
        for rule in (*SCENARIOS[sim.scenario][sim.method], "any"):
            hit = next((s for s in sorted(fired) if s >= sim.onset and (any(fired[s].values()) if rule == "any"
                                                                         else fired[s].get(rule))), None)
            delays.setdefault((sim.scenario, sim.method, rule), []).append(None if hit is None else hit - sim.onset)
    return {"total": total, "alone": alone, "delays": delays, "healthy_runs": healthy_runs,
            "runs_with_alarm": runs_with_alarm}


def false_rate(counts: dict, rule: str) -> float:
    """Firings on healthy steps per healthy step the rule was checked on."""
    return counts["false"][rule] / max(counts["steps"][rule], 1)


CANDIDATES = {  # rule -> (threshold names, candidate values: most sensitive first)
    "within_group_collapse": (("collapse_share", "collapse_margin"),
                              [(s, m) for s in (0.5, 0.6, 0.7, 0.8, 0.9) for m in (0.15, 0.25, 0.35)]),
    "cross_prompt_collapse": (("entropy_ratio", "duplicate_rate"),
                              [(r, d) for r in (0.85, 0.8, 0.75, 0.7, 0.6, 0.5) for d in (0.3, 0.4, 0.5)]),
    "answer_loss": (("answered_ratio",), [(v,) for v in (0.8, 0.75, 0.7, 0.65, 0.6, 0.5, 0.4, 0.3)]),
    "verifier_drift": (("drift_tv",), [(v,) for v in (0.1, 0.12, 0.15, 0.18, 0.2, 0.25, 0.3)]),
    "reward_signal_divergence": (("divergence",), [(v,) for v in (0.1, 0.15, 0.2, 0.25, 0.3)]),
    "entrenchment": (("entrenchment_null", "entrenchment_alt", "entrenchment_cusum"),
                     [(n, a, h) for h in (2.0, 2.5, 3.0) for n in (0.8, 0.7, 0.6) for a in (0.5, 0.4, 0.3)]),
}
SLOW_RULES = ("entrenchment",)


def tune(runs, max_fa: float, target: int, max_fa_slow: float | None = None) -> dict:
    """Per rule, among the candidates whose false-alarm rate (on the healthy steps where the rule is checked, and on
    the healthy runs' alone) is below `max_fa`: the least sensitive one (the last in `CANDIDATES` order: most margin
    against healthy runs unlike the simulated ones) whose 95th-percentile delay on the rule's scenarios is at most
    `target` steps; when none reaches the target, the one with the smallest 95th-percentile delay (misses count as
    never; on a tie, the one with fewer false alarms). The `SLOW_RULES` (budget `max_fa_slow`) take the candidate that
    flags the most runs within `target` + 1 steps (the issue's target), on a tie the one with fewer false alarms.
    Returns rule -> (thresholds, p95, fa)."""
    chosen = {}
    for rule, (names, values) in CANDIDATES.items():
        slow = rule in SLOW_RULES
        budget = max_fa_slow if slow and max_fa_slow is not None else max_fa
        best, fallback = None, None
        for value in values:
            t = dataclasses.replace(HealthThresholds(), **dict(zip(names, value, strict=True)))
            result = evaluate(runs, t)
            fa = max(false_rate(result["total"], rule), false_rate(result["alone"], rule))
            delays = sorted(d if d is not None else 10**6 for (_, _, r), ds in result["delays"].items()
                            if r == rule for d in ds)
            if fa >= budget or not delays:
                continue
            p95 = delays[int(0.95 * (len(delays) - 1))]
            entry = (dict(zip(names, value, strict=True)), p95, fa)
            if slow:
                within = sum(d <= target + 1 for d in delays)
                if best is None or (within, -fa) > best[0]:
                    best = ((within, -fa), entry)
            elif p95 <= target:
                best = entry
            elif fallback is None or (p95, fa) < fallback[1:]:
                fallback = entry
        chosen[rule] = (best[1] if slow and best else best) or fallback
    return chosen


def slow_onset(runs) -> dict:
    """Where the `entrenchment` scenario's drift exceeds one standard error of one step's verified-majority share:
    r0 (the healthy RLCE runs' share) and n (their eligible groups per step) measured on `runs`, the expected share
    at entrenchment level e computed from the script (the vote copied with probability e; otherwise a tie with
    probability `TIE`, else the healthy choice), and the first step after the ramp start where it exceeds
    r0 + sqrt(r0 (1 - r0) / n)."""
    agree = eligible = steps = 0
    for sim, run in runs:
        if sim.scenario == "healthy" and sim.method == "rlce" and run:
            stream = run[-1][1][0]["_since_reference"]
            for by_split in stream:
                a, e = pooled(by_split)
                agree, eligible = agree + a, eligible + e
            steps += len(stream)
    r0, n = agree / eligible, eligible / steps
    se = (r0 * (1 - r0) / n) ** 0.5

    def share(e: float) -> float:
        return (e + (1 - TIE) * (1 - e) * r0) / (e + (1 - TIE) * (1 - e))

    k = next(k for k in range(ENTRENCH_RAMP + 1) if share(k / ENTRENCH_RAMP) - r0 >= se)
    return {"r0": r0, "n": n, "se": se, "at_onset": share(0.5), "offset": k - ENTRENCH_RAMP // 2}


def report_slow(result: dict, onset: dict) -> None:
    delays = result["delays"].get(("entrenchment", "rlce", "entrenchment"), [])
    if not delays:
        return
    k = onset["offset"]
    print(f"slow entrenchment: healthy verified-majority share {onset['r0']:.3f} over {onset['n']:.1f} eligible "
          f"groups per step (one step's standard error {onset['se']:.3f}); expected share at the onset "
          f"{onset['at_onset']:.3f}; the expected drift exceeds one standard error at onset {k:+d}", end="")
    if k > 0:  # the drift becomes distinguishable only after the onset: the delay from there too
        within = sum(1 for d in delays if d is not None and d - k <= 5) / len(delays)
        print(f"; flagged within 5 steps of that point: {100 * within:.1f}% of runs")
    else:
        print(" (before the onset: the delays above are the ones to read)")


def report(result: dict, label: str) -> None:
    print(f"\n== {label} ==")
    print("false alarms per rule on the healthy steps where it was checked (checked steps of healthy runs and of "
          "failure runs before their failure starts), and on those of the healthy runs alone:")
    for rule in [*CANDIDATES, "any"]:
        cells = [f"{c['false'][rule]:5d} of {c['steps'][rule]:6d} {100 * false_rate(c, rule):6.2f} %"
                 for c in (result["total"], result["alone"])]
        print(f"  {rule:26s} {cells[0]}   {cells[1]}")
    print(f"healthy runs with any alarm: {result['runs_with_alarm']} of {result['healthy_runs']}")
    print("detection delay after onset (steps), by scenario and method:")
    print(f"  {'scenario':18s} {'method':6s} {'rule':26s} {'runs':>5s} {'missed':>6s} {'median':>6s} {'p95':>5s} "
          f"{'max':>5s} {'<=5':>6s}")
    for (scenario, method, rule), ds in sorted(result["delays"].items()):
        found = sorted(d for d in ds if d is not None)
        missed = len(ds) - len(found)
        p95 = found[int(0.95 * (len(found) - 1))] if found else None
        within = sum(1 for d in ds if d is not None and d <= 5) / len(ds)
        print(f"  {scenario:18s} {method:6s} {rule:26s} {len(ds):5d} {missed:6d} "
              f"{statistics.median(found) if found else float('nan'):6.1f} {p95 if p95 is not None else '-':>5} "
              f"{max(found) if found else '-':>5} {100 * within:5.1f}%")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=48,
                        help="prompts (rollout groups) per generation batch: the monitor reads one batch per record; "
                        "48 is the paper's PrefEval recipe (MOSEI 320, IntentQA 96)")
    parser.add_argument("--generations", type=int, default=4, help="rollouts per prompt (G)")
    parser.add_argument("--labels", type=int, default=4, help="closed labels (K)")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=3, help="health_warmup_steps")
    parser.add_argument("--window", type=int, default=3, help="health_window")
    parser.add_argument("--tune-seeds", type=int, default=60, help="seeds 0..N-1 tune the thresholds")
    parser.add_argument("--test-seeds", type=int, default=120, help="the next N seeds are held out")
    parser.add_argument("--tune-fa", type=float, default=0.002, help="false-alarm rate a tuned rule must stay below")
    parser.add_argument("--tune-fa-entrenchment", type=float, default=0.008,
                        help="false-alarm rate the slow entrenchment rule must stay below (it is the only rule that "
                        "needs more than a few steps of evidence)")
    parser.add_argument("--tune-target", type=int, default=4,
                        help="p95 detection delay (steps) a tuned rule must reach on the tuning seeds (one step "
                        "below the 5-step target, as a margin for the held-out seeds)")
    args = parser.parse_args(argv)

    start = time.time()
    tuning = simulate(range(args.tune_seeds), args)
    print(f"B={args.groups} prompts x G={args.generations} rollouts per step, K={args.labels} labels, "
          f"{args.steps} steps, warmup {args.warmup}, window {args.window}; tuning on seeds 0-{args.tune_seeds - 1}, "
          f"held out {args.tune_seeds}-{args.tune_seeds + args.test_seeds - 1}")
    chosen = tune(tuning, args.tune_fa, args.tune_target, args.tune_fa_entrenchment)
    shipped = HealthThresholds()
    print(f"\ntuned on the tuning seeds (least sensitive with p95 delay <= {args.tune_target} steps and false "
          f"alarms < {100 * args.tune_fa:.2f} % of healthy steps, {100 * args.tune_fa_entrenchment:.2f} % for "
          "entrenchment) vs shipped defaults:")
    for rule, entry in chosen.items():
        ship = {k: getattr(shipped, k) for k in CANDIDATES[rule][0]}
        tuned = "none" if entry is None else f"{entry[0]} (p95 delay {entry[1]}, false alarms {100 * entry[2]:.2f} %)"
        print(f"  {rule:26s} tuned {tuned}\n  {'':26s} shipped {ship}")
    onset = slow_onset(tuning)
    result = evaluate(tuning, shipped)
    report(result, "shipped defaults, tuning seeds")
    report_slow(result, onset)
    held_out = simulate(range(args.tune_seeds, args.tune_seeds + args.test_seeds), args)
    result = evaluate(held_out, shipped)
    report(result, "shipped defaults, HELD-OUT seeds")
    report_slow(result, onset)
    print(f"\n({time.time() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
