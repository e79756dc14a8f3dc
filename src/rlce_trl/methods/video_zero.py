"""Video-Zero (Zhang et al., 2026) as the RLCE paper reconstructs it (appendix D.5): the Questioner's reward, the
Solver's reward and the pseudo-labelled data built between the two phases.

- Questioner phase: [`VZQuestionerScorer`] (`reward_method="vz_questioner"`), [`questioner_reward`]. The frozen
  Solver answers each parsed question m=5 times with the clip and m=5 times blind (no frames, no transcript,
  [`BLIND_PREFIX`]), all in ONE call; r_evid is scored on video only (text-only tasks use the question and answer
  tags only).
- Between phases: [`build_solver_rows`]: one question per clip, m=10 Solver answers with the clip, kept by
  [`retention_reason`], target span by [`target_span`].
- Solver phase: [`solver_reward`] over the row's `pseudo_label`, `target_span`, `clip_seconds` columns, as the group
  scorer `reward_method="vz_solver"` ([`~rlce_trl.methods.pseudo_label.VZSolverScorer`]).

Templates, tag names and lexicons are ours, built from the fragments D.5 quotes (the paper's prompt figures are lost;
Video-Zero ships inference code only): CHANGELOG "Decisions". No torch import.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..data.media import media_items
from ..data.tasks import TASKS
from ..evidence.answers import extract_answer, match_label, normalize_answer
from ..scoring import Group, GroupResult, ScorerBase, StepStats
from ..verifiers.base import Request, Sampling, Verifier
from .common import reward_result
from .lexicons import ACTION_CUES, TEMPORAL_CUES
from .selfplay import (
    answer_key,
    ask,
    builder_stats,
    check_builder_inputs,
    clip_parts,
    clip_seconds,
    labels_sentence,
    majority_vote,
    role_row,
    seeded_subset,
    strip_instruction,
    with_rules,
)

#: The blind query's prefix (RLCE paper D.5, quoted).
BLIND_PREFIX = "No video is available for this question. Answer as best you can from the question text alone."
QUESTIONER_USER_PROMPT = "Follow the four steps for this clip and output only the tags."
QUESTIONER_USER_PROMPT_TEXT = "Write the question for this transcript and output only the tags."
_TAG = {t: re.compile(rf"<{t}>(.*?)</{t}>", re.DOTALL | re.I) for t in ("span", "evidence", "question", "answer")}
_NUMBER = re.compile(r"(\d+):(\d+(?:\.\d+)?)|(\d+(?:\.\d+)?)")
SOLVER_SPAN_RULE = "First give the clip's time span that supports your answer as <span>start-end</span> in seconds."
SOLVER_ANSWER_RULE = "End with your final answer as \\boxed{answer}."


# -- parsing ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VZProposal:
    """The Questioner's tags (`None` when missing or empty) and its span in seconds (`None` when unparseable)."""

    question: str | None
    answer: str | None
    span: tuple[float, float] | None = None
    evidence: str | None = None


def _tag(text: str, name: str) -> str | None:
    found = _TAG[name].search(text or "")
    return found.group(1).strip() or None if found else None


def parse_span(text: str | None) -> tuple[float, float] | None:
    """A time span, read leniently: the first two numbers (seconds, or `m:ss`), so "[12, 18]", "12-18",
    "12 to 18 seconds" and "0:12 - 0:18" all parse; `None` with fewer than two numbers. No range check here."""
    values = [int(minutes) * 60 + float(seconds) if minutes else float(plain)
              for minutes, seconds, plain in _NUMBER.findall(text or "")]
    return (values[0], values[1]) if len(values) >= 2 else None


def parse_vz_questioner(text: str) -> VZProposal:
    """The four tags `<span>`, `<evidence>`, `<question>`, `<answer>` (first occurrence of each, case-insensitive)."""
    question, answer, evidence, span = (_tag(text, t) for t in ("question", "answer", "evidence", "span"))
    return VZProposal(question, answer, parse_span(span), evidence)


def format_ok(proposal: VZProposal, video: bool, labels: Sequence[str] | None = None) -> bool:
    """r_format: every tag parses (question and answer only on text-only tasks; on video the span must read as two
    numbers); on a closed task the answer must be exactly one label."""
    tags = [proposal.question, proposal.answer] + ([proposal.evidence, proposal.span] if video else [])
    if any(t is None for t in tags):
        return False
    return not labels or match_label(proposal.answer, labels) is not None


def solver_span(text: str) -> tuple[float, float] | None:
    """The span a Solver response gives in its `<span>` tag (lenient)."""
    return parse_span(_tag(text, "span"))


# -- the pure rewards -------------------------------------------------------------------------------------------------
def span_valid(span: tuple[float, float] | None, seconds: float | None) -> bool:
    """Strict: inside [0, T] with end > start (finite numbers)."""
    if span is None or not seconds:
        return False
    start, end = span
    return math.isfinite(start) and math.isfinite(end) and 0.0 <= start < end <= seconds


def span_score(span: tuple[float, float] | None, seconds: float | None) -> float:
    """s_span = 1 - coverage / 0.9 for a valid span covering less than 90% of the clip, else 0."""
    if not span_valid(span, seconds):
        return 0.0
    coverage = (span[1] - span[0]) / seconds
    return 1.0 - coverage / 0.9 if coverage < 0.9 else 0.0


def lexicon_hits(text: str | None, lexicon: Sequence[str]) -> int:
    """How many entries of `lexicon` occur in the lower-cased text, as whole words or phrases."""
    low = (text or "").lower()
    return sum(bool(re.search(rf"\b{re.escape(entry)}\b", low)) for entry in lexicon)


def evidence_reward(span: tuple[float, float] | None, seconds: float | None, description: str | None) -> float:
    """r_evid = s_span + s_event + s_temp, the cue scores min(hits, 2) / 2 over the 31 action and 19 temporal cues."""
    s_event = min(lexicon_hits(description, ACTION_CUES), 2) / 2
    s_temp = min(lexicon_hits(description, TEMPORAL_CUES), 2) / 2
    return span_score(span, seconds) + s_event + s_temp


def learnability(c: float, num_labels: int | None = None) -> float:
    """r_learn: min(c, 1 - c) for free text; for K labels a triangle on [1/K, 1], 0 at both ends, 0.5 at the midpoint
    (1 + 1/K) / 2 (0.75 for K=2, 0.571 for K=7)."""
    if not num_labels:
        return min(c, 1.0 - c)
    if num_labels < 2:
        return 0.0
    mid, half = (1 + 1 / num_labels) / 2, (1 - 1 / num_labels) / 2
    return 0.5 * max(0.0, 1.0 - abs(c - mid) / half)


def dependency(p_with: float, p_without: float) -> float:
    """r_dep = max(0, p_with - p_without)."""
    return max(0.0, p_with - p_without)


def questioner_reward(fmt: float, learn: float, dep: float, evid: float) -> float:
    """r_Q = 0.1 r_format + 0.5 r_learn + 0.3 r_dep + min(r_evid, 0.3)."""
    return 0.1 * fmt + 0.5 * learn + 0.3 * dep + min(evid, 0.3)


def retention_floor(num_labels: int | None) -> float:
    """The lowest share c kept: 0.3 for free text; min(0.6, 1/K + 0.2) for K labels (0.6 for K=2, 0.343 for K=7)."""
    return 0.3 if not num_labels else min(0.6, 1 / num_labels + 0.2)


def retention_reason(answer: str | None, count: int, runner_up: int, m: int, num_labels: int | None = None,
                     lo: float = 0.3, hi: float = 0.8, margin: int = 2) -> str | None:
    """Why a pseudo-labelled question is dropped (`None`: kept). Free text: keep 0.3 <= c <= 0.8; closed: keep
    min(0.6, 1/K + 0.2) <= c <= 0.8 and a lead of at least `margin` votes over the runner-up."""
    if answer is None:
        return "no_valid_answer"
    c = count / m if m else 0.0
    floor = lo if not num_labels else retention_floor(num_labels)
    if c < floor:
        return "too_hard"
    if c > hi:
        return "too_easy"
    if num_labels and count - runner_up < margin:
        return "close_vote"
    return None


def target_span(agreeing: Sequence[tuple[float, float] | None], seconds: float | None,
                fallback: tuple[float, float] | None = None) -> tuple[tuple[float, float] | None, str]:
    """τ̂ and where it came from: the median start and median end of the valid spans of the agreeing rollouts
    (`"solver"`), else the Questioner's span when valid (`"questioner"`), else `(None, "none")`."""
    usable = [s for s in agreeing if span_valid(s, seconds)]
    if usable:
        return (statistics.median(s[0] for s in usable), statistics.median(s[1] for s in usable)), "solver"
    if span_valid(fallback, seconds):
        return (float(fallback[0]), float(fallback[1])), "questioner"
    return None, "none"


def alignment(pred: tuple[float, float] | None, target: tuple[float, float] | None, seconds: float | None) -> float:
    """r_align = IoU(pred, target) * prod over start and end of max(0, 1 - |delta| / T); 0 when either span is
    invalid (strict scoring)."""
    if not (span_valid(pred, seconds) and span_valid(target, seconds)):
        return 0.0
    inter = max(0.0, min(pred[1], target[1]) - max(pred[0], target[0]))
    union = max(pred[1], target[1]) - min(pred[0], target[0])
    closeness = [max(0.0, 1 - abs(pred[b] - target[b]) / seconds) for b in (0, 1)]
    return inter / union * closeness[0] * closeness[1]


def solver_reward(completion: str, pseudo_label: str, target: tuple[float, float] | None = None,
                  seconds: float | None = None, labels: Sequence[str] | None = None) -> float:
    """r_S = 1[answer = pseudo-label] * (1 + 0.5 r_align); a wrong answer scores 0 whatever its span."""
    answer = answer_key(completion, labels)
    expected = match_label(pseudo_label, labels) if labels else normalize_answer(pseudo_label)
    if answer is None or answer != expected:
        return 0.0
    return 1.0 + 0.5 * alignment(solver_span(completion), target, seconds)


# -- prompts ----------------------------------------------------------------------------------------------------------
def questioner_system_prompt(task: str = "", labels: Sequence[str] | None = None, video: bool = True) -> str:
    """Our reconstruction of Video-Zero's four-step Questioner template (D.5)."""
    if not video:
        return ("You write one question about the speaker in a transcript of a conversation. Write a question whose "
                "answer depends on what the speaker said, and give its answer.\nOutput exactly these two tags and "
                "nothing else:\n<question>the question</question>\n<answer>the answer</answer>")
    known = TASKS.get(task)  # the task's subject phrase (D.5); other tasks ask about "the speaker"
    subject = ((known.subject if known else None) or "the speaker") if labels else None
    step3 = (f"3. Write a question about {subject} whose answer depends on that span." if labels
             else "3. Write a question whose answer depends on that span.")
    step4 = f"4. Give the answer. {labels_sentence(labels)}" if labels else "4. Give the answer."
    return (
        f"You write one question about {subject or 'it'} from a video clip and its transcript, in four steps.\n"
        "1. Find one short time span of the clip where something observable happens.\n"
        "2. Describe what happens in that span: what the speaker does, and when.\n"
        f"{step3}\n{step4}\n"
        "Output exactly these four tags and nothing else:\n<span>start-end in seconds</span>\n"
        "<evidence>what happens in the span</evidence>\n<question>the question</question>\n<answer>the answer</answer>"
    )


def questioner_row(clip_row: dict) -> dict:
    """A Questioner-phase row for one clip (video rows get the four-tag template, text rows the two-tag one)."""
    context, videos = clip_parts(clip_row)
    instruction = QUESTIONER_USER_PROMPT if videos else QUESTIONER_USER_PROMPT_TEXT
    system = questioner_system_prompt(clip_row.get("task", ""), clip_row.get("answer_options") or None, bool(videos))
    return role_row(clip_row, system, f"{context}\n\n{instruction}")


def solver_text(context: str, question: str, labels: Sequence[str] | None, video: bool) -> str:
    """The Solver's user turn [ours]: the clip (or transcript), the question, the label sentence on closed tasks, the
    grounding tag on video."""
    lead = "Watch the clip and read the transcript." if video else "Read the transcript."
    return with_rules(f"{lead}\n\n{context}\n\nQuestion: {question}", labels, SOLVER_SPAN_RULE if video else "",
                      SOLVER_ANSWER_RULE)


def blind_messages(question: str, labels: Sequence[str] | None) -> list[dict[str, str]]:
    """The blind query: no frames, no transcript, the prefix, the question."""
    return [{"role": "user", "content": with_rules(f"{BLIND_PREFIX}\n\nQuestion: {question}", labels,
                                                    SOLVER_ANSWER_RULE)}]


def solver_row(clip_row: dict, question: str, pseudo_label: str, span: tuple[float, float] | None,
               seconds: float | None, c: float) -> dict:
    """A Solver-phase row with the columns the Solver's reward reads (`vz_solver`)."""
    context, videos = clip_parts(clip_row)
    text = solver_text(context, question, clip_row.get("answer_options") or None, bool(videos))
    return role_row(clip_row, "You are a helpful assistant.", text, question=question, pseudo_label=pseudo_label,
                    target_span=list(span) if span else None, clip_seconds=seconds, pseudo_label_share=c)


# -- the Questioner scorer --------------------------------------------------------------------------------------------
class VZQuestionerScorer(ScorerBase):
    """Video-Zero's Questioner reward as a group scorer: ONE batched call to the frozen Solver per step, holding for
    every parsed question `m` answers with the clip and `m_blind` blind answers.

    Args:
        verifier: the frozen model; the partner when `partner` is `None`.
        settings: unused (every scorer is built the same way).
        partner: the frozen Solver S_t.
        m, m_blind: answers with the clip and without it (5 and 5).
        temperature, top_p, top_k, max_tokens: the Solver's sampling (T 1.0 as the paper's rollouts).
    """

    name = "vz_questioner"

    def __init__(self, verifier: Verifier, settings=None, *, partner: Verifier | None = None, m: int = 5,
                 m_blind: int = 5, temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0,
                 max_tokens: int = 128):
        if m < 1 or m_blind < 1:
            raise ValueError(f"vz_questioner: m={m} and m_blind={m_blind} must be at least 1.")
        self.partner = partner or verifier
        self.with_clip = Sampling(temperature=temperature, top_p=top_p, top_k=top_k, max_tokens=max_tokens, n=m)
        self.blind = Sampling(temperature=temperature, top_p=top_p, top_k=top_k, max_tokens=max_tokens, n=m_blind)

    @staticmethod
    def _video(group: Group) -> bool:
        """Video mode from the row's instruction; from the media when the row has neither."""
        return QUESTIONER_USER_PROMPT in group.context or (
            QUESTIONER_USER_PROMPT_TEXT not in group.context and group.media is not None)

    def score(self, groups: Sequence[Group]) -> tuple[list[GroupResult], StepStats]:
        stats = StepStats(groups=len(groups))
        proposals = [[parse_vz_questioner(t) for t in g.completions] for g in groups]
        index, requests = [], []
        for gi, group in enumerate(groups):
            video = self._video(group)
            instruction = QUESTIONER_USER_PROMPT if video else QUESTIONER_USER_PROMPT_TEXT
            context = strip_instruction(group.context, instruction)
            for ri, p in enumerate(proposals[gi]):
                if p.question is None:
                    continue
                index.append((gi, ri))
                requests.append(Request([{"role": "user", "content": solver_text(context, p.question, group.labels,
                                                                                 video)}],
                                        self.with_clip, stage="vz_with", media=group.media))
                requests.append(Request(blind_messages(p.question, group.labels), self.blind, stage="vz_blind"))
        replies = self.partner.generate(requests)
        answered = {key: (replies[2 * k], replies[2 * k + 1]) for k, key in enumerate(index)}
        results = []
        for gi, group in enumerate(groups):
            video, labels = self._video(group), group.labels
            seconds = clip_seconds(group.media)
            rewards, parts = [], []
            for ri, p in enumerate(proposals[gi]):
                fmt = float(format_ok(p, video, labels))
                evid = evidence_reward(p.span, seconds, p.evidence) if video else 0.0
                learn = dep = 0.0
                if (gi, ri) not in answered:
                    stats.extra["unparsed"] += 1
                else:
                    with_reply, blind_reply = answered[(gi, ri)]
                    if any(r.error is not None or not r.texts for r in (with_reply, blind_reply)):
                        stats.verdict_failures["partner_error"] += 1
                        rewards.append(None)  # no signal: the partner failed
                        parts.append(None)
                        continue
                    votes = [answer_key(t, labels) for t in with_reply.texts]
                    learn = learnability(majority_vote(votes)[1] / len(votes), len(labels) if labels else None)
                    own = match_label(p.answer, labels) if labels else normalize_answer(p.answer or "") or None
                    blind = [answer_key(t, labels) for t in blind_reply.texts]
                    p_with = sum(v is not None and v == own for v in votes) / len(votes)
                    p_without = sum(v is not None and v == own for v in blind) / len(blind)
                    dep = dependency(p_with, p_without)
                    stats.tests_validated += len(votes) + len(blind)
                rewards.append(questioner_reward(fmt, learn, dep, evid))
                parts.append({"format": fmt, "learn": learn, "dep": dep, "evid": evid})
            stats.statuses["scored"] += 1
            results.append(reward_result(rewards, "scored", {"parts": parts}))
        return results, stats


# -- between the phases -----------------------------------------------------------------------------------------------
def build_solver_rows(
    clip_rows: Sequence[dict], questioner: Verifier, solver: Verifier, *, m: int = 10, lo: float = 0.3,
    hi: float = 0.8, margin: int = 2, seed: int = 0, n_clips: int | None = 600, questioner_max_tokens: int = 512,
    solver_max_tokens: int = 128,
) -> tuple[list[dict], dict]:
    """D_{t+1} for the Solver: the frozen Questioner writes one question per clip of the seeded `n_clips` (one call,
    T 1.0), the frozen Solver answers each `m` times with the clip (one call, T 1.0), kept by [`retention_reason`],
    with τ̂ from [`target_span`].

    Returns `(rows, stats)`: Solver rows ([`solver_row`]) and `clips`, `generated`, `parsed`, `retained`,
    `retained_fraction`, `dropped` (count by reason), `span_source` (`solver` / `questioner` / `none`).
    """
    check_builder_inputs(clip_rows, "build_solver_rows", m=m, n_clips=n_clips, lo=lo, hi=hi)
    clips = seeded_subset(clip_rows, n_clips, seed)
    q_sampling = Sampling(temperature=1.0, max_tokens=questioner_max_tokens, n=1)
    q_replies = ask(questioner, [questioner_row(c) for c in clips], clips, q_sampling, "vz_generate")
    dropped, sources = Counter(), Counter()
    candidates = []
    for clip, reply in zip(clips, q_replies, strict=True):
        proposal = parse_vz_questioner(reply.texts[0] if reply.texts else "")
        if reply.error is not None:
            dropped["questioner_error"] += 1
        elif proposal.question is None:
            dropped["unparsed"] += 1
        else:
            candidates.append((clip, proposal))
    s_sampling = Sampling(temperature=1.0, max_tokens=solver_max_tokens, n=m)
    drafts = [solver_row(c, p.question, "", None, None, 0.0) for c, p in candidates]
    s_replies = ask(solver, drafts, [c for c, _ in candidates], s_sampling, "vz_pseudo_label")
    kept = []
    for (clip, proposal), reply in zip(candidates, s_replies, strict=True):
        if reply.error is not None or not reply.texts:
            dropped["solver_error"] += 1
            continue
        labels = clip.get("answer_options") or None
        votes = [answer_key(t, labels) for t in reply.texts]
        answer, count, runner_up = majority_vote(votes)
        reason = retention_reason(answer, count, runner_up, len(votes), len(labels) if labels else None, lo, hi,
                                  margin)
        if reason:
            dropped[reason] += 1
            continue
        seconds = clip_seconds(media_items(clip["prompt"]))
        agreeing = [solver_span(t) for t, v in zip(reply.texts, votes, strict=True) if v == answer]
        span, source = target_span(agreeing, seconds, proposal.span)
        sources[source] += 1
        if not labels:  # the pseudo-label as written, not its normal form
            answer = next(extract_answer(t) for t, v in zip(reply.texts, votes, strict=True) if v == answer)
        kept.append(solver_row(clip, proposal.question, answer, span, seconds, count / len(votes)))
    return kept, builder_stats(clips, len(clips), len(candidates), kept, dropped, span_source=dict(sources))
