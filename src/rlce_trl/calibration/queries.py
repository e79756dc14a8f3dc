"""Which logged groups to show a person next (VeriFine's query set H_t: uncertain, inconsistent, high-impact cases).

Input: logged groups in the bench format (`analysis/groups_log.py`: `rollouts`, and per method `answers`, `assignment`,
`status`, `verified_answer`, `tests`), or a training run's evidence trail (`rlce_evidence.jsonl`: the same fields at
the top of each record, for the run's own method). Categories [ours, operationalising the paper's three words]:
- `uncertain`: the RLCE group has no verified answer (tie / unresolved), the two best answers' verification scores
  (share of "yes" among the tests favouring each) are within `margin`, or at least half of its verdicts are "unknown";
- `inconsistent`: the RLCE winner differs both from the majority answer and from the Policy-Judge's accepted answer;
- `high_impact`: the RLCE winner is a minority answer (fewer than half of the answered rollouts), so the advantage
  sign flips for most rollouts.
Positives and negatives are both kept (VeriFine section 3.4.1): nothing is filtered on correctness; groups in more
categories come first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ..evidence.votes import ranking


def _scores(entry: dict) -> list[float]:
    """Per distinct answer, the share of "yes" among the tests favouring it (0 when it has none)."""
    yes, total = Counter(), Counter()
    for test in entry.get("tests") or []:
        favoured = test.get("favoured")
        if isinstance(favoured, int):
            total[favoured] += 1
            yes[favoured] += test.get("verdict") == "yes"
    return [yes[k] / total[k] if total[k] else 0.0 for k in range(len(entry.get("answers") or []))]


def _entry(record: dict, method: str) -> dict:
    """The method's part of a record: `record["methods"][method]` (bench format) or, for an evidence-trail record of
    that method, the record itself. Raises `KeyError` when neither holds."""
    if "methods" in record:
        return record["methods"][method]
    if "answers" in record and "assignment" in record and record.get("method", method) == method:
        return record
    raise KeyError(method)


def categorize(record: dict, method: str = "rlce", judge: str = "policy_judge", margin: float = 0.1) -> list[str]:
    """The query categories of one logged group (possibly none). Raises `KeyError`/`TypeError` on a malformed one."""
    entry = _entry(record, method)
    answers, assignment = list(entry.get("answers") or []), list(entry.get("assignment") or [])
    winner = entry.get("verified_answer")
    out = []
    scores = sorted(_scores(entry), reverse=True)
    verdicts = [t.get("verdict") for t in entry.get("tests") or []]
    unknown_share = sum(v in ("unknown", None) for v in verdicts) / len(verdicts) if verdicts else 0.0
    if (winner is None or entry.get("status") not in (None, "verified")
            or (len(scores) >= 2 and scores[0] - scores[1] <= margin) or unknown_share >= 0.5):
        out.append("uncertain")
    counts = Counter(answers[a] for a in assignment if isinstance(a, int) and 0 <= a < len(answers))
    answered = sum(counts.values())
    if winner is not None and counts:
        majority = ranking(counts)[0][0]  # tie rule "first": the answer given first
        judged = ((record.get("methods") or {}).get(judge) or {}).get("verified_answer")
        if winner != majority and (judged is None or winner != judged):
            out.append("inconsistent")
        if counts.get(winner, 0) < answered / 2:
            out.append("high_impact")
    return out


def select_queries(records: Sequence[dict], k: int = 50, method: str = "rlce", judge: str = "policy_judge",
                   margin: float = 0.1) -> tuple[list[dict], int]:
    """Up to `k` groups in at least one category, most categories first (then in file order), each with its
    `query_categories`; and the number of malformed records skipped."""
    if k < 1:
        raise ValueError(f"k must be >= 1, not {k}.")
    picked, skipped = [], 0
    for n, record in enumerate(records):
        try:
            categories = categorize(record, method, judge, margin)
        except (KeyError, TypeError, AttributeError):
            skipped += 1
            continue
        if categories:
            picked.append((-len(categories), n, {**record, "query_categories": categories}))
    picked.sort(key=lambda item: item[:2])
    return [item[2] for item in picked[:k]], skipped
