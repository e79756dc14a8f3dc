"""Producing a logged-groups file: run several reward methods over the same rollout groups with one verifier, with
their verifier cost (format: [`rlce_trl.analysis.bench`])."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..evidence.answers import extract_boxed, match_label, normalize_answer
from ..evidence.pipeline import EvidenceSettings
from ..evidence.state import Group
from ..verifiers.base import Reply, Request, Verifier

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


class CountingVerifier(Verifier):
    """Passes requests to `inner` and counts them, with the characters of their prompts (a proxy for prompt tokens,
    which backends do not report)."""

    def __init__(self, inner: Verifier):
        super().__init__()
        self.inner = inner
        self.name = inner.name
        self.supports_structured_output = inner.supports_structured_output
        self.prompt_chars = 0

    def _generate(self, requests: list[Request]) -> list[Reply]:
        self.prompt_chars += sum(len(m["content"]) for r in requests for m in r.messages)
        return self.inner.generate(requests)

    def transport_metrics(self) -> dict[str, float]:
        return self.inner.transport_metrics()

    def session(self):
        return self.inner.session()


def log_groups(
    groups: Sequence[Group],
    golds: Sequence[str],
    verifier: Verifier,
    methods: Sequence[str] = DEFAULT_METHODS,
    settings: EvidenceSettings | None = None,
    options: dict[str, dict] | None = None,
    prompt_ids: Sequence[str] | None = None,
    correct_fn: CorrectFn = default_correct,
    per_group: bool = True,
    keep_test_text: bool = False,
) -> list[dict]:
    """Run every method of `methods` (names of [`rlce_trl.methods.REWARD_METHODS`]) over the same groups with one
    verifier and return the logged-groups records (format in the module docstring).

    Args:
        per_group: score each group in its own `score([group])` call, so that every group's verifier cost is exact.
            The trainer batches all groups of a step into one call per stage; the requests and tokens are the same,
            only the number of calls differs. `False` scores all groups in one step and spreads the cost evenly.
        options: per-method keyword options for the scorer factories, e.g. `{"rler": {"max_active": 5}}`.
        keep_test_text: also log the text of every test.
    """
    from ..methods import build_scorer  # the registry imports the scorers; analysis stays importable without it

    counting = CountingVerifier(verifier)
    records = []
    for k, (group, gold) in enumerate(zip(groups, golds, strict=True)):
        rollouts = [extract_boxed(c) for c in group.completions]
        if group.labels:
            rollouts = [match_label(a, group.labels) if a is not None else None for a in rollouts]
        records.append({
            "prompt_id": prompt_ids[k] if prompt_ids is not None else group.prompt_key,
            "gold": gold,
            "labels": list(group.labels) if group.labels else None,
            "rollouts": rollouts,
            "correct": [correct_fn(a, gold, group.labels) for a in rollouts],
            "methods": {},
        })
    for name in methods:
        scorer = build_scorer(name, counting, settings, **(options or {}).get(name, {}))
        batches = [[k] for k in range(len(groups))] if per_group else [list(range(len(groups)))]
        for batch in batches:
            before, chars = counting.stats.snapshot(), counting.prompt_chars
            results, _ = scorer.score([groups[k] for k in batch])
            work = counting.stats.since(before)
            share = 1 / len(batch)
            for k, result in zip(batch, results, strict=True):
                group, gold = groups[k], golds[k]
                entry = {
                    "rewards": list(result.verified),
                    "status": result.status,
                    "answers": list(result.answers),
                    "assignment": list(result.assignment),
                    "answer_correct": [correct_fn(a, gold, group.labels) for a in result.answers],
                    "verified_answer": result.verified_answer,
                    "calls": work.calls * share,
                    "requests": work.requests * share,
                    "tokens": work.generated_tokens * share,
                    "prompt_chars": (counting.prompt_chars - chars) * share,
                }
                if result.tests:
                    entry["tests"] = [
                        {"favoured": t.favoured, "against": t.against, "verdict": t.verdict, "tie_break": t.tie_break,
                         **({"text": t.text} if keep_test_text else {})}
                        for t in result.tests
                    ]
                records[k]["methods"][name] = entry
    return records
