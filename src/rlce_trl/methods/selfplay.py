"""Pieces shared by the two question-generating co-evolution methods (VisPlay, Video-Zero): boxed votes and their
majority, and the rows of a role (Questioner, Reasoner, Solver) built from a clip row. No torch import."""

from __future__ import annotations

import random
from collections.abc import Sequence

from ..data.media import media_items, video_blocks
from ..evidence.answers import boxed_spans, extract_answer, last_boxed, match_label, normalize_answer
from ..evidence.prompts import render_context
from ..evidence.votes import ranking, tally
from ..verifiers.base import Reply, Request, Sampling, Verifier

#: The vote of a response without a box: mathruler's `extract_boxed_content` returns the literal "None", and VisPlay
#: counts it like any other answer (it can be the majority; a "None" majority is then invalid as a pseudo-label).
NONE_ANSWER = "None"


def is_whole_boxed(text: str) -> bool:
    """Whether the whole response (outer whitespace aside) is one non-empty `\\boxed{...}`."""
    body = (text or "").strip()
    spans = boxed_spans(body)
    return bool(spans) and spans[0] == (0, len(body)) and bool(body[len("\\boxed{") : -1].strip())


def vote_key(text: str, labels: Sequence[str] | None = None) -> str | None:
    """One boxed vote: the label (closed tasks) or the normal form (free text) of the last box; [`NONE_ANSWER`] for a
    response without a box or, on closed tasks, with a box that names no label; `None` (no vote, still in the
    denominator) for an empty box."""
    boxed = last_boxed(text)
    if boxed is None:
        return NONE_ANSWER
    if not boxed:
        return None
    if labels:
        return match_label(boxed, labels) or NONE_ANSWER
    return normalize_answer(boxed) or None


def majority_vote(votes: Sequence[str | None]) -> tuple[str | None, int, int]:
    """`(majority, its count, the runner-up's count)`; ties go to the first answer given (VisPlay: `max` over an
    insertion-ordered dict). `(None, 0, 0)` when nobody voted."""
    ranked = ranking(tally(votes))  # tie rule "first": the paper's code keeps the first answer given
    if not ranked:
        return None, 0, 0
    return ranked[0][0], ranked[0][1], ranked[1][1] if len(ranked) > 1 else 0


def consistency(votes: Sequence[str | None]) -> float:
    """c: the majority's share of ALL responses (unboxed ones vote `None`, empty boxes do not vote)."""
    return majority_vote(votes)[1] / len(votes) if votes else 0.0


def ask(verifier: Verifier, rows: Sequence[dict], clips: Sequence[dict], sampling: Sampling,
        stage: str) -> list[Reply]:
    """One batched call over role rows: each row's prompt as text messages, the clip of its clip row as media."""
    requests = [Request(text_messages(row["prompt"]), sampling, stage=stage, media=media_items(clip["prompt"]))
                for row, clip in zip(rows, clips, strict=True)]
    return verifier.generate(requests)


def text_messages(prompt) -> list[dict[str, str]]:
    """A role row's prompt as `Request.messages` (text parts only; the clip travels in `Request.media`)."""
    out = []
    for message in prompt:
        content = message["content"]
        if not isinstance(content, str):
            content = "\n".join(b.get("text") or "" for b in content if b.get("type") == "text").strip()
        out.append({"role": message["role"], "content": content})
    return out


def clip_parts(row: dict) -> tuple[str, list[dict]]:
    """A clip row's sample context as text (`render_context`: the system prompt dropped, a conversation as
    `Role: text` turns, a single user turn as its bare text) and its video blocks, as given."""
    text = render_context(row["prompt"])
    single = text.startswith("User: ") and "\n\nAssistant: " not in text
    return (text[len("User: ") :] if single else text), video_blocks(row["prompt"])


def role_row(row: dict, system: str, text: str, **columns) -> dict:
    """A new GRPO row for a role: `system` + one user turn of the row's video blocks and `text` (content blocks, as
    the HBA rows, when the row has video; plain strings, as the text rows, when not); the row's `id`, `task`,
    `answer_options` and `videos` carried over, `gold` never."""
    _, videos = clip_parts(row)
    if videos:
        prompt = [{"role": "system", "content": [{"type": "text", "text": system}]},
                  {"role": "user", "content": [*videos, {"type": "text", "text": text}]}]
    else:
        prompt = [{"role": "system", "content": system}, {"role": "user", "content": text}]
    return {
        "id": str(row.get("id", "")),
        "task": row.get("task", ""),
        "prompt": prompt,
        "answer_options": list(row.get("answer_options") or []),
        "videos": list(row.get("videos") or []),
        **columns,
    }


def strip_instruction(context: str, instruction: str) -> str:
    """The sample context of a role row's rendered prompt (one user turn): without the role's instruction and the
    turn's `User: ` prefix."""
    text = context.replace(instruction, "").strip()
    return text[len("User: ") :].strip() if text.startswith("User: ") else text


def seeded_subset(rows: Sequence[dict], n: int | None, seed: int) -> list[dict]:
    """`n` rows drawn with `seed`, in their original order (all rows when `n` is `None` or at least their count)."""
    if n is None or n >= len(rows):
        return list(rows)
    keep = sorted(random.Random(seed).sample(range(len(rows)), n))
    return [rows[i] for i in keep]


def labels_sentence(labels: Sequence[str] | None) -> str:
    """The closed-label instruction (Video-Zero's Solver sentence); empty for free text."""
    return f"Answer with exactly one of: {', '.join(labels)}." if labels else ""


def with_rules(text: str, labels: Sequence[str] | None, *rules: str) -> str:
    """`text`, then the closed-label sentence and the non-empty `rules`, one a line."""
    return "\n".join(p for p in (text, labels_sentence(labels), *rules) if p)


def builder_stats(clips: Sequence[dict], generated: int, parsed: int, kept: Sequence[dict], dropped: dict,
                  **more) -> dict:
    """What a between-phases builder reports: `clips`, `generated`, `parsed`, `retained`, `retained_fraction`
    (retained / generated) and `dropped` (count by reason), plus `more`."""
    return {"clips": len(clips), "generated": generated, "parsed": parsed, "retained": len(kept),
            "retained_fraction": len(kept) / generated if generated else 0.0, "dropped": dict(dropped), **more}


def answer_key(text: str, labels: Sequence[str] | None = None) -> str | None:
    """A Solver response's answer as a vote: its label (closed) or normal form (free text), read with the baselines'
    parser; `None` (no vote) when there is none."""
    answer = extract_answer(text or "", labels or None)
    if answer is None:
        return None
    return answer if labels else (normalize_answer(answer) or None)


def clip_seconds(media: Sequence[dict] | None) -> float | None:
    """T: the total duration of the clips in seconds (metadata `duration`, else frames / fps); `None` if unknown."""
    total = 0.0
    for item in media or []:
        meta = item.get("metadata") or {}
        duration = meta.get("duration")
        if duration is None and meta.get("fps"):
            duration = (meta.get("total_num_frames") or 0) / meta["fps"]
        if not duration:
            return None
        total += float(duration)
    return total or None


def check_builder_inputs(clip_rows: Sequence[dict], builder: str, **counts_and_bounds) -> None:
    """One-line errors before any generation: unusable clip rows (index and fix), counts below 1 (`m=0`), a
    retention window outside 0 <= lo <= hi <= 1."""
    from ..data.checks import check_rows

    check_rows(clip_rows, where=f"{builder}: clip_rows")
    bounds = {k: counts_and_bounds.pop(k) for k in ("lo", "hi") if k in counts_and_bounds}
    for name, value in counts_and_bounds.items():
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"{builder}: {name}={value!r} must be a whole number of at least 1.")
    if bounds and not 0.0 <= bounds["lo"] <= bounds["hi"] <= 1.0:
        raise ValueError(f"{builder}: lo={bounds['lo']}, hi={bounds['hi']}: need 0 <= lo <= hi <= 1.")
