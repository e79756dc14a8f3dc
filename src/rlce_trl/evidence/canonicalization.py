"""Canonicalization: rollouts → distinct answers (section 3.2; appendix C.1).

Closed labels: each extracted answer maps to its label directly, no model call. Free text: answers with the same
normal form are merged deterministically; the remaining pairs of one group go to the frozen verifier in ONE greedy,
schema-constrained request, and pairs it calls "same" are merged (transitively).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from collections.abc import Sequence

from ..scoring import Group
from ..verifiers.base import Reply, Request, Sampling
from .answers import extract_answer, normalize_answer
from .prompts import equivalence_messages, equivalence_schema
from .state import GroupState


def canonicalize_deterministic(group: Group, fallback: bool = True) -> GroupState:
    """Distinct answers without any model call, each rollout's answer extracted as at evaluation (appendix A,
    [`extract_answer`], with or without its `fallback`). A rollout with no answer, or whose answer is not one of the
    closed labels, gets none (`assignment[g] is None`)."""
    state = GroupState(group=group)
    index_of: dict[str, int] = {}
    for completion in group.completions:
        answer = extract_answer(completion, group.labels, fallback)
        if answer is None:
            state.assignment.append(None)
            continue
        norm = normalize_answer(answer)
        if norm not in index_of:  # the first spelling seen represents the answer
            index_of[norm] = len(state.answers)
            state.answers.append(answer)
        state.assignment.append(index_of[norm])
    return state


def _known_members(state: GroupState, known: Sequence[str]) -> dict[int, int]:
    """Group answers that already are a known class (renamed to it by normal form): answer index -> class index."""
    return {i: known.index(a) for i, a in enumerate(state.answers) if a in known}


def equivalence_pairs(state: GroupState, known: Sequence[str] = ()) -> list[tuple[int, int]]:
    """Pairs to judge, as indices into `known + state.answers`: every pair of the group's answers, and each answer
    against each `known` class (the static ablation's classes of this prompt). Two known classes are never asked
    again, nor is an answer that already is a known class; only groups with two or more answers are compared."""
    if state.num_answers < 2:
        return []
    m, members = len(known), _known_members(state, known)
    return [(i, j) for i, j in itertools.combinations(range(m + state.num_answers), 2)
            if j >= m and j - m not in members and not (i >= m and i - m in members)]


def equivalence_request(state: GroupState, max_tokens: int, known: Sequence[str] = ()) -> Request:
    pairs = equivalence_pairs(state, known)
    return Request(
        messages=equivalence_messages(state.group.context, [*known, *state.answers], pairs),
        sampling=Sampling(temperature=0.0, max_tokens=max_tokens),
        json_schema=equivalence_schema(len(pairs)),
        stage="equivalence",
        media=state.group.media,
    )


_SAME = {"same", "yes", "true", "equivalent"}
_DIFFERENT = {"different", "no", "false", "not equivalent"}


def parse_equivalence(reply_text: str, num_pairs: int) -> tuple[list[bool | None], bool]:
    """Per pair: True (same), False (different) or None (not readable). Second value: whether the reply was readable
    as a whole. Tolerates prose around the JSON object and `P1: same` lines."""
    found: dict[str, str] = {}
    if match := re.search(r"\{.*\}", reply_text, flags=re.DOTALL):
        with contextlib.suppress(json.JSONDecodeError):
            obj = json.loads(match.group(0))
            if isinstance(obj, dict):
                found = {str(k).upper(): str(v) for k, v in obj.items()}
    if not found:
        found = {k.upper(): v for k, v in re.findall(r"\b(P\d+)\"?\s*[:=-]\s*\"?([A-Za-z ]+)", reply_text)}
    values = [found.get(f"P{m + 1}", "").strip().casefold() for m in range(num_pairs)]
    decisions = [True if v in _SAME else False if v in _DIFFERENT else None for v in values]
    return decisions, all(d is not None for d in decisions)


def apply_equivalence(state: GroupState, reply: Reply, known: Sequence[str] = ()) -> None:
    """Merge the pairs the verifier judged "same" (union-find, so merging is transitive). Unreadable pairs stay
    distinct: wrongly keeping two answers apart costs a comparison, wrongly merging them would reward one for the
    other. Each unreadable pair is counted in `equivalence_failures`.

    With `known` classes (static ablation), an answer merged with a known class takes that class's text, so its
    stored tests are found again; a merged class is represented by its earliest member, known classes first."""
    m = len(known)
    pairs = equivalence_pairs(state, known)
    text = reply.texts[0] if reply.texts and reply.error is None else ""
    decisions, _ = parse_equivalence(text, len(pairs))
    parent = list(range(m + state.num_answers))
    for i, k in _known_members(state, known).items():
        parent[m + i] = k

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for (i, j), same in zip(pairs, decisions, strict=True):
        if same is None:
            state.equivalence_failures += 1
        elif same:
            ri, rj = root(i), root(j)
            if ri != rj:
                parent[max(ri, rj)] = min(ri, rj)  # the earlier answer represents the merged class
    everyone = [*known, *state.answers]
    roots = sorted({root(m + i) for i in range(state.num_answers)})
    new_index = {r: k for k, r in enumerate(roots)}
    state.answers = [everyone[r] for r in roots]
    state.assignment = [None if a is None else new_index[root(m + a)] for a in state.assignment]
