"""The reward-analysis bench: compare label-free reward methods on the same logged rollout groups (paper sections
4.2-4.3), with their verifier cost.

Gold labels are used here for evaluation only; no reward ever sees them.

## Logged-groups format (JSONL, one line per rollout group)

```json
{"prompt_id": "s0001",
 "gold": "humour",
 "labels": ["humour", "not humour"],               // null for free text
 "rollouts": ["humour", null, "not humour", ...],  // the extracted \\boxed{} answer of each rollout, or null
 "correct": [true, false, false, ...],             // per rollout, judged against gold (evaluation only)
 "methods": {
   "rlce": {
     "rewards": [1.0, 0.0, 0.0, ...],              // the task reward per rollout (GroupResult.verified), null = none
     "status": "verified",
     "answers": ["humour", "not humour"],          // the method's distinct answers
     "assignment": [0, null, 1, ...],              // answer index of each rollout
     "answer_correct": [true, false],              // per distinct answer, judged against gold
     "verified_answer": "humour",
     "tests": [{"favoured": 0, "against": 1, "verdict": "yes", "tie_break": false}, ...],  // RLCE family only
     "calls": 2, "requests": 4, "tokens": 37, "prompt_chars": 5120   // verifier cost of this group
   },
   "usc": {...}, "policy_judge": {...}, "rar": {...}, "rler": {...}
 }}
```

`tests[*].favoured` / `against` index the method's own `answers`; `against` is null for pointwise tests; `verdict` is
"yes" / "no" / "unknown" or null (unreadable). A file from a real run is produced by [`log_groups`], which runs
several scorers over the same groups with one verifier; any other producer only has to write these fields (`tests`,
`answer_correct` and the cost fields are optional; `correct` is required). [`read_log`] reads it back checked. Per
method the bench (`rlce-trl analyze`) reports the analyses listed in [`rlce_trl.analysis`] and the verifier cost.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence

from ..data.jsonl import read_jsonl_counted
from ..errors import InputError
from ..evidence.answers import extract_answer, match_label, normalize_answer
from ..evidence.pipeline import EvidenceSettings
from ..scoring import Group
from ..verifiers.base import Verifier

logger = logging.getLogger(__name__)

DEFAULT_METHODS = ("rlce", "usc", "policy_judge", "ttrl", "rar", "rler")
CorrectFn = Callable[[str | None, str, Sequence[str] | None], bool]


def default_correct(answer: str | None, gold: str, labels: Sequence[str] | None) -> bool:
    """Closed labels: the answer maps to the gold label; free text: same normal form as gold. Pass your own
    `correct_fn` for anything finer (MOSEI's polarity collapse, an LLM judge for free text)."""
    if answer is None:
        return False
    if labels:
        return match_label(answer, labels) is not None and match_label(answer, labels) == match_label(gold, labels)
    return normalize_answer(answer) == normalize_answer(gold)


def log_groups(
    groups: Sequence[Group],
    golds: Sequence[str],
    verifier: Verifier,
    methods: Sequence[str] = DEFAULT_METHODS,
    settings: EvidenceSettings | None = None,
    prompt_ids: Sequence[str] | None = None,
    correct_fn: CorrectFn = default_correct,
) -> list[dict]:
    """Run every method of `methods` (names of [`rlce_trl.methods.REWARD_METHODS`]) over the same groups with one
    verifier and return the logged-groups records (format in the module docstring).

    Each group is scored in its own `score([group])` call, so that every group's verifier cost is exact (the trainer
    batches all groups of a step into one call per stage: the requests and tokens are the same, only the number of
    calls differs).
    """
    from ..methods import build_scorer  # the registry imports the scorers; analysis stays importable without it

    records = []
    for k, (group, gold) in enumerate(zip(groups, golds, strict=True)):
        rollouts = [extract_answer(c, group.labels, fallback=False) for c in group.completions]
        records.append({
            "prompt_id": prompt_ids[k] if prompt_ids is not None else group.prompt_key,
            "gold": gold,
            "labels": list(group.labels) if group.labels else None,
            "rollouts": rollouts,
            "correct": [correct_fn(a, gold, group.labels) for a in rollouts],
            "methods": {},
        })
    for name in methods:
        scorer = build_scorer(name, verifier, settings)
        for group, gold, record in zip(groups, golds, records, strict=True):
            before = verifier.stats.snapshot()
            (result,), _ = scorer.score([group])
            work = verifier.stats.since(before)
            entry = {
                "rewards": list(result.verified),
                "status": result.status,
                "answers": list(result.answers),
                "assignment": list(result.assignment),
                "answer_correct": [correct_fn(a, gold, group.labels) for a in result.answers],
                "verified_answer": result.verified_answer,
                "calls": float(work.calls),
                "requests": float(work.requests),
                "tokens": float(work.generated_tokens),
                "prompt_chars": float(work.prompt_chars),
            }
            if result.tests:
                entry["tests"] = [
                    {"favoured": t.favoured, "against": t.against, "verdict": t.verdict, "tie_break": t.tie_break}
                    for t in result.tests
                ]
            record["methods"][name] = entry
    return records


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _entry_problem(name: str, entry, n: int) -> str | None:
    """Why one method's entry of a record cannot be analysed (`None` when it can)."""
    rewards = entry.get("rewards") if isinstance(entry, dict) else None
    if not isinstance(rewards, list) or len(rewards) != n or not all(r is None or _number(r) for r in rewards):
        return f"method {name!r} has no `rewards` list of numbers (or null) as long as `correct`"
    for cost in ("calls", "requests", "tokens", "prompt_chars"):
        if entry.get(cost) is not None and not _number(entry[cost]):
            return f"method {name!r} has a non-numeric `{cost}`"
    answer_correct, tests = entry.get("answer_correct"), entry.get("tests")
    if answer_correct is not None and (not isinstance(answer_correct, list)
                                       or not all(isinstance(c, bool) for c in answer_correct)):
        return f"method {name!r} has `answer_correct` that is not a list of booleans"
    if tests is not None:
        if not isinstance(tests, list):
            return f"method {name!r} has `tests` that is not a list"
        k = len(answer_correct or [])
        for test in tests:
            if not (isinstance(test, dict) and isinstance(test.get("favoured"), int)
                    and 0 <= test["favoured"] < max(k, 1)
                    and (test.get("against") is None or isinstance(test["against"], int) and 0 <= test["against"] < k)
                    and test.get("verdict") in ("yes", "no", "unknown", None)):
                return (f"method {name!r} has a test {str(test)[:80]} without `favoured` / `against` indexing its "
                        "`answer_correct` or with a verdict other than yes / no / unknown / null")
    return None


def read_log(path: str | os.PathLike, methods: Sequence[str] | None = None) -> list[dict]:
    """The records of a logged-groups file, checked: an empty log, a record without the fields the bench needs, or
    `--methods` naming a method the log lacks raise [`InputError`] naming the record and the fix."""
    records, skipped = read_jsonl_counted(path, "logged-groups file")
    if skipped:
        logger.warning("%s: skipped an unreadable last line (cut short?)", path)
    if not records:
        raise InputError(f"logged-groups file {str(path)!r} holds no records: log some groups first (see "
                         "`rlce_trl.analysis.groups_log` for the format) or use --synthetic N.")
    fix = "each record needs `correct` (a list of booleans) and `methods` ({name: {\"rewards\": [...]}})"
    for k, record in enumerate(records):
        correct, by_method = record.get("correct"), record.get("methods")
        if not isinstance(correct, list) or not all(isinstance(c, bool) for c in correct):
            problem = "`correct` is missing or not a list of booleans"
        elif not isinstance(by_method, dict) or not by_method:
            problem = "`methods` is missing or empty"
        else:  # the first method entry with a problem
            problem = next(filter(None, (_entry_problem(n, e, len(correct)) for n, e in by_method.items())), None)
        if problem:
            raise InputError(f"logged-groups file {str(path)!r} record {k + 1}: {problem}. Fix: {fix}.")
    if methods:
        present = {name for record in records for name in record["methods"]}
        if unknown := [m for m in methods if m not in present]:
            raise InputError(f"--methods {unknown[0]!r} is not in the log (it has {', '.join(sorted(present))}).")
    return records
