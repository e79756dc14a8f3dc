"""Simulation mode: a synthetic validator of known error rate, to see how composing tests helps (paper Fig. 3 left).

**Test-level simulation** ([`simulate_composition`]). One example has `num_answers` distinct answers, answer 0 the
correct one, and `tests_per_direction` tests for every ordered answer pair (6 per direction and two answers give the
12 tests of the paper's x-axis). The synthetic validator gets each informative test right with probability
`1 - e` and wrong with probability `e`:

    P(z = 1 | test favours the correct answer) = 1 - e        P(z = 1 | test favours an incorrect answer) = e

(a test between two incorrect answers is satisfied with probability 1/2), and abstains with probability
`abstain_rate`. With `concentration=None` every example has `e = error_rate` and tests are independent. Real tests
of one example are not independent (they read the same evidence with the same validator), so
`concentration=kappa` draws a per-example `e ~ Beta(kappa * error_rate, kappa * (1 - error_rate))`: the mean error
rate is unchanged, but some examples are hard for all of their tests, which flattens the curve as it does in the
paper. Tests are then added in random order without replacement and the aggregate verdict is scored exactly as the
bench scores logged groups ([`rlce_trl.analysis.composition`]).

**Pipeline-level simulation** ([`SyntheticVerifier`], [`synthetic_groups`]). A scripted *stand-in* for the frozen
model that answers every request of RLCE and of the baselines with the same error model, knowing the gold label of
each synthetic sample from an `[id:...]` tag in its question. Running the real scorers over synthetic groups with it
([`rlce_trl.analysis.groups_log.log_groups`]) produces a logged-groups file for the bench with no model at all. Its
numbers show the bench working, not how any real model behaves.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..data.hba import URFUNNY_LABELS
from ..data.tasks import paper_tasks
from ..evidence.answers import extract_boxed, normalize_answer
from ..evidence.state import EvidenceTest
from ..scoring import Group
from ..verifiers.base import Reply, Request, Verifier
from .composition import CurvePoint, accuracy_vs_incorrect_fraction, accuracy_vs_num_tests

#: The paper's measured points (section 4.3, Fig. 3), to set beside simulated curves: task title -> composed tests ->
#: verdict accuracy (left), and -> share of incorrect tests -> accuracy (right). The numbers live in the tasks'
#: definitions ([`rlce_trl.data.tasks.PaperResults`]).
PAPER_NUM_TESTS = {t.paper.title: t.paper.by_num_tests for t in paper_tasks() if t.paper.by_num_tests}
PAPER_INCORRECT_FRACTION = {t.paper.title: t.paper.by_incorrect_fraction for t in paper_tasks()
                            if t.paper.by_incorrect_fraction}


# -- test-level simulation --------------------------------------------------------------------------------------------
def simulated_tests(
    rng: np.random.Generator,
    num_answers: int = 2,
    tests_per_direction: int = 6,
    error_rate: float = 0.3,
    abstain_rate: float = 0.0,
    concentration: float | None = None,
) -> tuple[list[EvidenceTest], list[bool]]:
    """One synthetic example: `(tests, answer_correct)`, answer 0 correct (see the module docstring)."""
    if concentration is not None and 0 < error_rate < 1:
        error_rate = float(rng.beta(concentration * error_rate, concentration * (1 - error_rate)))
    tests = []
    for i, j in itertools.permutations(range(num_answers), 2):
        for _ in range(tests_per_direction):
            if rng.random() < abstain_rate:
                verdict = "unknown"
            else:
                p_yes = 0.5 if 0 not in (i, j) else (1 - error_rate if i == 0 else error_rate)
                verdict = "yes" if rng.random() < p_yes else "no"
            tests.append(EvidenceTest(i, j, None, verdict))
    return tests, [k == 0 for k in range(num_answers)]


@dataclass
class SimulationResult:
    error_rate: float
    by_num_tests: list[CurvePoint]
    by_incorrect_fraction: list[CurvePoint]


def simulate_composition(
    error_rates: Sequence[float] = (0.2, 0.3, 0.4),
    max_tests: int = 12,
    trials: int = 2000,
    num_answers: int = 2,
    tests_per_direction: int = 6,
    abstain_rate: float = 0.0,
    concentration: float | None = None,
    seed: int = 0,
    ties: str = "random",
) -> list[SimulationResult]:
    """Aggregate-verdict accuracy versus the number of composed tests, and versus the realized fraction of incorrect
    tests, for each validator error rate, over `trials` synthetic examples (one random order of tests each)."""
    results = []
    for k, error_rate in enumerate(error_rates):
        rng = np.random.default_rng([seed, k])
        groups = [simulated_tests(rng, num_answers, tests_per_direction, error_rate, abstain_rate, concentration)
                  for _ in range(trials)]
        by_k = accuracy_vs_num_tests(groups, max_tests, 1, seed=seed + k, ties=ties)
        by_fraction = accuracy_vs_incorrect_fraction(groups, ties=ties)
        results.append(SimulationResult(error_rate, by_k, by_fraction))
    return results


def exact_single_test_accuracy(error_rate: float) -> float:
    """Closed form at k = 1 with two answers and ties credited 1/2: a test favours the correct answer half the
    time; satisfied (1 - e) it wins, unsatisfied it ties; favouring the wrong answer, satisfied (e) it loses,
    unsatisfied it ties. Accuracy = 1/2 [(1 - e) + e/2] + 1/2 [(1 - e)/2] = 3/4 - e/2."""
    return 0.75 - error_rate / 2


# -- pipeline-level simulation ----------------------------------------------------------------------------------------
_TAG = re.compile(r"\[id:([^\]]+)\]")


def synthetic_groups(
    num_groups: int = 40, group_size: int = 4, accuracy: float = 0.55, seed: int = 0
) -> list[tuple[str, str, Group]]:
    """`(prompt_id, gold, group)` triples of a synthetic closed-label task (UR-FUNNY's labels; 5% of the rollouts give
    no answer). Each sample has its own policy accuracy (Beta around `accuracy`), so some groups are mostly right and
    some mostly wrong, as on a real training set."""
    rng, labels = random.Random(seed), URFUNNY_LABELS
    cues = ["laughs", "pauses", "raises the voice", "smiles", "sighs", "shrugs", "repeats a word", "speaks flatly"]
    out = []
    for n in range(num_groups):
        pid = f"s{n:04d}"
        gold = rng.choice(list(labels))
        p = rng.betavariate(4 * accuracy, 4 * (1 - accuracy))
        context = (f"User: Transcript of clip {pid}: ...\nWhat does the speaker intend? [id:{pid}]\n"
                   f"Options: {', '.join(labels)}.")
        completions = []
        for _ in range(group_size):
            if rng.random() < 0.05:
                completions.append("I cannot tell from the clip.")
                continue
            answer = gold if rng.random() < p else rng.choice([lab for lab in labels if lab != gold])
            completions.append(f"The speaker {rng.choice(cues)}. \\boxed{{{answer}}}")
        out.append((pid, gold, Group(context, completions, labels=tuple(labels), key=pid)))
    return out


class SyntheticVerifier(Verifier):
    """A stand-in frozen model with known error rates, for every stage RLCE and the baselines use.

    It reads the sample's gold label through the `[id:...]` tag of the request (see [`synthetic_groups`]); nothing
    else about a request is known to it beyond the candidate answers its prompt names. Greedy stages are
    deterministic per prompt (a hash seeds them), sampled ones draw from a running generator.

    Args:
        golds: `{prompt id: gold answer}`.
        error_rate: mean probability that a validated test, a judgment (the Policy-Judge's Yes/No) or a rubric score
            is wrong.
        concentration: per-sample error rate `~ Beta(kappa e, kappa (1 - e))` (see the module docstring); `None`:
            every sample has `error_rate`.
        seed: seed of everything random.
    """

    name = "synthetic"
    supports_structured_output = True
    #: Probability that the validator answers "unknown".
    abstain_rate = 0.05
    #: Probability that a rubric's scores track correctness at all (else they are noise).
    rubric_alignment = 0.5

    def __init__(self, golds: dict[str, str], error_rate: float = 0.3, concentration: float | None = None,
                 seed: int = 0):
        super().__init__()
        self.golds = {k: normalize_answer(v) for k, v in golds.items()}
        self.error_rate, self.concentration, self.seed = error_rate, concentration, seed
        self._rng = random.Random(seed)
        self._claims: dict[str, tuple[str, str, str | None]] = {}  # claim -> (sample, favoured, against)
        self._sample_error: dict[str, float] = {}

    # -- helpers ----------------------------------------------------------------------------------------------------
    def _error(self, sample: str) -> float:
        if sample not in self._sample_error:
            e = self.error_rate
            if self.concentration is not None and 0 < e < 1:
                draw = random.Random(f"{self.seed}:{sample}")
                e = draw.betavariate(self.concentration * e, self.concentration * (1 - e))
            self._sample_error[sample] = e
        return self._sample_error[sample]

    def _correct(self, sample: str, answer: str | None) -> bool:
        return answer is not None and normalize_answer(answer) == self.golds.get(sample)

    # -- stages -----------------------------------------------------------------------------------------------------
    def _generate(self, requests: list[Request]) -> list[Reply]:
        replies = []
        for request in requests:
            texts = [self._answer(request) for _ in range(request.sampling.n)]
            replies.append(Reply(texts, ["stop"] * len(texts), num_tokens=sum(len(t.split()) + 1 for t in texts)))
        return replies

    def _answer(self, request: Request) -> str:
        content, stage = request.messages[-1]["content"], request.stage
        sample = (_TAG.findall(content) or [""])[0]
        digest = hashlib.sha256(json.dumps([self.seed, request.messages]).encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))  # greedy stages: deterministic per prompt
        if stage == "construction":
            pair = re.search(r"Answer A: (.*)\nAnswer B: (.*)\n", content)
            one = re.search(r"candidate answer to the final request in the input is: (.*)\n", content)
            favoured, against = (pair.group(1), pair.group(2)) if pair else (one.group(1), None)
            claim = f"Observable cue number {len(self._claims) + 1} is present."
            self._claims[claim] = (sample, favoured, against)
            return claim
        if stage == "validation":
            claim = re.search(r"Claim: (.*)\n", content).group(1)
            sample, favoured, against = self._claims.get(claim, (sample, None, None))
            if rng.random() < self.abstain_rate:
                return "unknown"
            right = self._correct(sample, favoured)
            informative = against is None or right != self._correct(sample, against)
            truth = right if informative else rng.random() < 0.5
            wrong = informative and rng.random() < self._error(sample)
            return "yes" if truth != wrong else "no"
        if stage == "equivalence":
            pairs = re.findall(r"^P(\d+): ", content, flags=re.MULTILINE)
            return json.dumps({f"P{m}": "different" for m in pairs})
        if stage == "judge":
            answer = re.search(r"Proposed answer to the final request in the input: (.*)\n", content).group(1)
            right = self._correct(sample, answer) != (rng.random() < self.error_rate)
            return "Yes" if right else "No"
        if stage == "usc_selection":
            responses = re.findall(r"Response (\d+):\n(.*?)(?=\n\nResponse \d+:|\n\nEvaluate)", content,
                                   flags=re.DOTALL)
            answers = [normalize_answer(extract_boxed(text) or "") for _, text in responses]
            best = max(answers, key=answers.count)
            return str(answers.index(best) + 1)
        if stage in ("rubric_seed", "rubric_generation"):
            count = 3 if stage == "rubric_seed" else rng.randint(0, 2)
            # a negative rubric names a failure (D.3); the text says which, since the judge never sees the sign
            texts = ["reads cue {} of the speaker correctly", "explains cue {} of the speaker", "misreads cue {}"]
            return json.dumps({"rubrics": [
                {"criterion": texts[k % 3].format(rng.randint(0, 10**6)),
                 "type": "negative" if k % 3 == 2 else "positive"}
                for k in range(count)
            ]})
        if stage == "rubric_judge":
            response = content.split("Response:\n", 1)[1].split("\n\n### Task", 1)[0]
            rubric = re.search(r"Criterion: (.*)\n", content).group(1)
            aligned = random.Random(f"{self.seed}:{rubric}").random() < self.rubric_alignment
            if not aligned:
                return str(rng.choice([0, 1, 2]))
            good = self._correct(sample, extract_boxed(response)) != (rng.random() < self._error(sample))
            fires = good != rubric.startswith("misreads")
            return "2" if fires else "0"
        return ""
