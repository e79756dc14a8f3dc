"""Canonicalization: rollouts → distinct answers (section 3.2; appendix C.1).

Closed labels: each extracted answer maps to its label directly, no model call. Free text: answers with the same
normal form are merged deterministically; the remaining pairs of one group go to the frozen verifier in ONE greedy,
schema-constrained request, and pairs it calls "same" are merged (transitively).
"""

from __future__ import annotations

import itertools
import json
import re

from ..verifiers.base import Reply, Request, Sampling
from .answers import extract_answer, extract_boxed, match_label, normalize_answer
from .prompts import equivalence_messages, equivalence_schema
from .state import Group, GroupState


def canonicalize_deterministic(group: Group, fallback: bool = True) -> GroupState:
    """Distinct answers without any model call.

    Answers are extracted as at evaluation (appendix A): the `\\boxed{}` content, and with `fallback` (default), for a
    response without a box, the one label it names (closed labels) or the whole response (free text). Without
    `fallback` only boxed answers count. A rollout with no answer, or whose answer is not one of the closed labels,
    gets none (`assignment[g] is None`)."""
    state = GroupState(group=group)
    index_of: dict[str, int] = {}
    for completion in group.completions:
        if fallback:
            answer = extract_answer(completion, group.labels)
        else:
            answer = extract_boxed(completion)
            answer = match_label(answer, group.labels) if group.labels is not None else answer
        if answer is None:
            state.assignment.append(None)
            continue
        norm = normalize_answer(answer)
        if norm not in index_of:  # the first spelling seen represents the answer
            index_of[norm] = len(state.answers)
            state.answers.append(answer)
        state.assignment.append(index_of[norm])
    return state


def needs_equivalence(state: GroupState) -> bool:
    return state.group.labels is None and state.num_answers >= 2


def equivalence_pairs(state: GroupState) -> list[tuple[int, int]]:
    return list(itertools.combinations(range(state.num_answers), 2))


def equivalence_request(state: GroupState, max_tokens: int) -> Request:
    pairs = equivalence_pairs(state)
    return Request(
        messages=equivalence_messages(state.group.context, state.answers, pairs),
        sampling=Sampling(temperature=0.0, max_tokens=max_tokens),
        json_schema=equivalence_schema(len(pairs)),
        stage="equivalence",
    )


_SAME = {"same", "yes", "true", "equivalent"}
_DIFFERENT = {"different", "no", "false", "not equivalent"}


def parse_equivalence(reply_text: str, num_pairs: int) -> tuple[list[bool | None], bool]:
    """Per pair: True (same), False (different) or None (not readable). Second value: whether the reply was readable
    as a whole. Tolerates prose around the JSON object and `P1: same` lines."""
    decisions: list[bool | None] = [None] * num_pairs
    found: dict[str, str] = {}
    match = re.search(r"\{.*\}", reply_text, flags=re.DOTALL)
    if match:
        try:
            obj = json.loads(match.group(0))
            if isinstance(obj, dict):
                found = {str(k).upper(): str(v) for k, v in obj.items()}
        except json.JSONDecodeError:
            pass
    if not found:
        found = {k.upper(): v for k, v in re.findall(r"\b(P\d+)\"?\s*[:=-]\s*\"?([A-Za-z ]+)", reply_text)}
    for m in range(num_pairs):
        value = found.get(f"P{m + 1}", "").strip().casefold()
        decisions[m] = True if value in _SAME else False if value in _DIFFERENT else None
    return decisions, all(d is not None for d in decisions)


def apply_equivalence(state: GroupState, reply: Reply) -> None:
    """Merge the pairs the verifier judged "same" (union-find, so merging is transitive). Unreadable pairs stay
    distinct: wrongly keeping two answers apart costs a comparison, wrongly merging them would reward one for the
    other. Each unreadable pair is counted in `equivalence_failures`."""
    pairs = equivalence_pairs(state)
    text = reply.texts[0] if reply.texts and reply.error is None else ""
    decisions, _ = parse_equivalence(text, len(pairs))
    parent = list(range(state.num_answers))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for (i, j), same in zip(pairs, decisions):
        if same is None:
            state.equivalence_failures += 1
        elif same:
            ri, rj = root(i), root(j)
            if ri != rj:
                parent[max(ri, rj)] = min(ri, rj)  # the earlier answer represents the merged class
    roots = sorted({root(i) for i in range(state.num_answers)})
    new_index = {r: k for k, r in enumerate(roots)}
    state.merged_by_verifier = state.num_answers - len(roots)
    state.answers = [state.answers[r] for r in roots]
    state.assignment = [None if a is None else new_index[root(a)] for a in state.assignment]
