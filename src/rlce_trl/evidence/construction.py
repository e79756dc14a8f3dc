"""Evidence-test construction (section 3.2, Eq. 1).

For every pair of distinct answers (i, j) the frozen model samples tests favouring a_i over a_j and, separately,
a_j over a_i: one request per ordered pair, with `n = tests per direction` samples, each sample one test. The
pointwise ablation builds tests for each answer alone.
"""

from __future__ import annotations

import itertools
import re

from ..verifiers.base import Reply, Request, Sampling
from .prompts import construction_messages, pointwise_construction_messages
from .state import EvidenceTest, GroupState

#: A test longer than this is a runaway reply, not a checkable claim.
MAX_TEST_CHARS = 600
# List markers ("1.", "-", "*", "#") and a label ("Test 2:", "Evidence test:", "Claim:") before the claim itself.
_LEAD = re.compile(
    r"^\s*(?:(?:[-*>#]+|\d+[.)])\s*)?(?:(?:(?:evidence\s+)?test|claim)\b\s*\d*\s*[:.-]\s*)?", re.IGNORECASE
)


def ordered_pairs(num_answers: int) -> list[tuple[int, int]]:
    """Both directions of every unordered pair: (i, j) and (j, i) for i < j."""
    return [p for i, j in itertools.combinations(range(num_answers), 2) for p in ((i, j), (j, i))]


def construction_request(
    state: GroupState, favoured: int, against: int | None, n: int, sampling: Sampling, prompts=None
) -> Request:
    """`n` tests favouring answer `favoured` over `against` (pointwise: `against is None`, built with no other
    answer), with the group's clips. Each sample is read for its first non-blank line only (`parse_test`), so a
    backend may stop there."""
    if against is None:
        messages = pointwise_construction_messages(state.group.context, state.answers[favoured])
    else:
        messages = construction_messages(state.group.context, state.answers[favoured], state.answers[against], prompts)
    sampling = Sampling(sampling.temperature, sampling.top_p, sampling.top_k, sampling.max_tokens, n, one_line=True)
    return Request(messages=messages, sampling=sampling, stage="construction", media=state.group.media)


def parse_test(text: str, finish_reason: str) -> tuple[str | None, str | None]:
    """One test from one sampled reply: `(claim, None)` or `(None, reason)` with reason in
    `error | empty | runaway`. Keeps the first non-empty line, without list markers, a "Test:" label or quotes."""
    if finish_reason == "error":
        return None, "error"
    lines = [line for line in text.replace("```", "").splitlines() if line.strip()]
    if not lines:
        return None, "empty"
    claim = _LEAD.sub("", lines[0].replace("**", ""), count=1).strip().strip('"“”').strip()
    if not claim:
        return None, "empty"
    # A cut-off reply with nothing after its first line is a claim that never ended.
    if len(claim) > MAX_TEST_CHARS or (finish_reason == "length" and len(lines) == 1):
        return None, "runaway"
    return claim, None


def tests_from_reply(reply: Reply, favoured: int, against: int | None, tie_break: bool = False) -> list[EvidenceTest]:
    tests = []
    for text, finish in zip(reply.texts, reply.finish_reasons, strict=False):
        claim, failure = parse_test(text, "error" if reply.error else finish)
        tests.append(EvidenceTest(favoured, against, claim, failure=failure, tie_break=tie_break))
    return tests
