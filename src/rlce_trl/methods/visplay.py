"""VisPlay (He et al., 2025) as the RLCE paper adapts it (appendix D.4): the Questioner's reward, the Reasoner's
reward and the data built between the two phases.

- Questioner phase: [`VisPlayQuestionerScorer`] (`reward_method="visplay_questioner"`), r_Q = r_unc - r_div;
  c, in r_unc, is the majority share of the frozen Reasoner's m=10 boxed answers (every answer in the denominator);
  r_div is added in `finalize_batch` on the whole gathered batch.
- Between phases: [`build_reasoner_rows`].
- Reasoner phase: [`reasoner_reward`] over the row's `pseudo_label` column, as the group scorer
  `reward_method="visplay_reasoner"` ([`~rlce_trl.methods.pseudo_label.PseudoLabelScorer`]).

Prompts follow VisPlay's released code (`question_generate/question_generate.py`, `vllm_service_init/
start_vllm_server.py`, `question_evaluate/evaluate.py`), with the image replaced by the clip and transcript and the
numerical / regression types replaced by multiple choice and open-ended (RLCE paper D.4). Vote reading, hard drops and
the Reasoner instruction are our readings of that code, listed in CHANGELOG "Decisions". No torch import.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..evidence.answers import extract_answer, match_label, normalize_answer
from ..scoring import Group, GroupResult, ScorerBase, StepStats
from ..verifiers.base import Request, Sampling, Verifier
from .bleu import cluster_shares
from .common import reward_result
from .selfplay import (
    NONE_ANSWER,
    ask,
    builder_stats,
    check_builder_inputs,
    clip_parts,
    consistency,
    is_whole_boxed,
    labels_sentence,
    last_boxed,
    majority_vote,
    role_row,
    seeded_subset,
    strip_instruction,
    vote_key,
    with_rules,
)

QUESTIONER_SYSTEM_PROMPT = (
    "You are an intelligent Question Generator. Your task is to create a question based on the given video clip and "
    "transcript.\n\n**Requirements (must follow exactly):**\n"
    "1. Analyze the clip and the transcript carefully and understand all details.\n"
    "2. Generate **exactly one question** that is directly related to the clip.\n"
    "3. Choose the question type from **only one** of the following:\n{type_lines}\n"
    "4. The question must require analysis or reasoning, not just description.\n"
    "5. Provide the correct answer.{label_rule}\n"
    "6. **Output must be strictly in this format, with nothing else:**\n"
    "The following THREE blocks:\n<type>X</type>\n<question>Y</question>\n<answer>Z</answer>\n\n"
    "**Strict rules:**\n- Do **not** use any other labels, punctuation, or formatting.\n"
    "- Do **not** add commentary, explanations, or extra text.\n- `X` must be exactly one of: {type_names}.\n"
    "- Always use the exact three-line structure above."
)
TYPE_LINES = {
    "multiple choice": "- `multiple choice` (Yes/No or four options labeled A, B, C, D; only one correct answer)",
    "open-ended": "- `open-ended` (a short free-text answer)",
}
#: VisPlay's instruction after the template (RLCE paper D.4, quoted).
QUESTIONER_USER_PROMPT = (
    "Generate one new, challenging reasoning question based on this video clip. Remember to format the output "
    "exactly as instructed."
)
SCORER_SYSTEM_PROMPT = (
    "You are an AI visual question answering assistant. Answer questions based only on the video clip and transcript "
    "provided. You **must only output your final answer inside \\boxed{}**. Do not write explanations or any other "
    "text."
)
#: VisPlay's Reasoner instruction without its step-by-step thinking (thinking is off, RLCE paper D.4) [ours].
REASONER_INSTRUCTION = "Put your final answer within \\boxed{}."
_TAGS = re.compile(r"<type>(.*?)</type>.*?<question>(.*?)</question>.*?<answer>(.*?)</answer>", re.DOTALL)
_TAG_SPACE = re.compile(r"<\s*(/?)\s*(type|question|answer)\s*>", re.IGNORECASE)


# -- VisPlay's pure rewards -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProposedQuestion:
    """The Questioner's three blocks."""

    type: str
    question: str
    answer: str


def parse_questioner(text: str) -> ProposedQuestion | None:
    """`<type>..</type><question>..</question><answer>..</answer>` (VisPlay's `match`: first occurrence, anything
    around the blocks tolerated, spaces inside the tags forgiven); `None` when a block is missing or empty (VisPlay's
    scoring server then returns score -1)."""
    found = _TAGS.search(_TAG_SPACE.sub(lambda m: f"<{m.group(1)}{m.group(2).lower()}>", text or ""))
    if not found:
        return None
    kind, question, answer = (part.strip() for part in found.groups())
    return ProposedQuestion(kind, question, answer) if kind and question and answer else None


def uncertainty_reward(c: float | None) -> float:
    """r_unc: min(c, 1 - c), peaking at 0.5 for c = 0.5; -1 for an output that does not parse (`c is None`)."""
    return -1.0 if c is None else min(c, 1.0 - c)


def questioner_reward(c: float | None, penalty: float) -> float:
    """r_Q = r_unc - r_div."""
    return uncertainty_reward(c) - penalty


def reasoner_reward(completion: str, pseudo_label: str, labels: Sequence[str] | None = None) -> float:
    """r_R = 0.9 * 1[answer = pseudo-label] + 0.1 * 1[the whole response is \\boxed{...}]. The answer is read with the
    baselines' parser (`extract_answer`: the label of a closed task, the normalised free text otherwise)."""
    answer = extract_answer(completion or "", labels or None)
    if labels:
        correct = answer is not None and answer == match_label(pseudo_label, labels)
    else:
        correct = answer is not None and normalize_answer(answer) == normalize_answer(pseudo_label)
    return 0.9 * correct + 0.1 * is_whole_boxed(completion)


HARD_DROP_MATCHES = ("literal", "word")
_WORD_BOX = re.compile(r"\\boxed|\bbox(es|ed)?\b")
_WORD_TEXT = re.compile(r"\\text\b|\btext\b")


def hard_drop(question: str, answer: str, match: str = "literal") -> str | None:
    """VisPlay's hard drops (`question_evaluate/evaluate.py`): a question that contains "box" or "证明" ("proof"), or a
    majority answer that contains "text", is dropped. `match="literal"` reproduces the code (case-folded substring:
    "inbox" and "context" drop too); `"word"` matches only the word or the LaTeX command (`\\boxed`, `\\text`).
    Returns the drop reason or `None`."""
    q, a = question.lower(), answer.lower()
    boxed = ("box" in q) if match == "literal" else bool(_WORD_BOX.search(q))
    if boxed or "证明" in question:
        return "question_mentions_box"
    if ("text" in a) if match == "literal" else _WORD_TEXT.search(a):
        return "answer_contains_text"
    return None


def retention_reason(question: str, answer: str | None, c: float, lo: float = 0.3, hi: float = 0.8,
                     match: str = "literal") -> str | None:
    """Why a pseudo-labelled candidate is dropped (`None`: kept): no valid majority, a hard drop, c below `lo`
    (too hard) or above `hi` (too easy)."""
    if answer is None or answer == NONE_ANSWER or not answer.strip():
        return "no_valid_answer"
    return hard_drop(question, answer, match) or ("too_hard" if c < lo else "too_easy" if c > hi else None)


# -- prompts ----------------------------------------------------------------------------------------------------------
def questioner_system_prompt(labels: Sequence[str] | None = None) -> str:
    """VisPlay's Questioner template for a closed task (multiple choice, the answer one of `labels`) or a free-text
    one (multiple choice or open-ended)."""
    types = ("multiple choice",) if labels else ("multiple choice", "open-ended")
    return QUESTIONER_SYSTEM_PROMPT.format(
        type_lines="\n".join(TYPE_LINES[t] for t in types),
        label_rule=f" The answer must be exactly one of: {', '.join(labels)}." if labels else "",
        type_names=" or ".join(f"`{t}`" for t in types),
    )


def questioner_row(clip_row: dict) -> dict:
    """A Questioner-phase row: the clip's video blocks, its context as a transcript, VisPlay's instruction."""
    context, _ = clip_parts(clip_row)
    labels = clip_row.get("answer_options") or None
    return role_row(clip_row, questioner_system_prompt(labels), f"{context}\n\n{QUESTIONER_USER_PROMPT}")


def scorer_messages(context: str, proposal: ProposedQuestion, labels: Sequence[str] | None) -> list[dict[str, str]]:
    """The frozen Reasoner's scoring prompt (VisPlay's scoring server): answer inside \\boxed{} only."""
    user = (
        f"{context}\n\nThis is a question: {proposal.question}. The question type is: {proposal.type}.\n"
        f"{labels_sentence(labels)}\n**IMPORTANT:** Only output your answer in the form \\boxed{{answer}}."
    )
    return [{"role": "system", "content": SCORER_SYSTEM_PROMPT}, {"role": "user", "content": user}]


def reasoner_row(clip_row: dict, question: str, pseudo_label: str, c: float) -> dict:
    """A Reasoner-phase row: the clip, the generated question, VisPlay's instruction; `pseudo_label` and its share."""
    context, _ = clip_parts(clip_row)
    labels = clip_row.get("answer_options") or None
    text = with_rules(f"{context}\n\n{question}", labels, REASONER_INSTRUCTION)
    return role_row(clip_row, "You are a helpful assistant.", text, question=question, pseudo_label=pseudo_label,
                    pseudo_label_share=c)


# -- the Questioner scorer --------------------------------------------------------------------------------------------
class VisPlayQuestionerScorer(ScorerBase):
    """VisPlay's Questioner reward as a group scorer: one batched call to the frozen Reasoner per step (m answers per
    parsed question), r_unc in `score`, r_div over the whole gathered batch in `finalize_batch`.

    Args:
        verifier: the frozen model; the partner when `partner` is `None`.
        settings: unused (every scorer is built the same way).
        partner: the frozen Reasoner R_t.
        m, temperature, top_p, top_k, max_tokens: the Reasoner's sampling (VisPlay: 10, 1.0, 1.0, 40).
        distance_threshold: the clustering threshold on 1 - BLEU (0.5).
    """

    name = "visplay_questioner"

    def __init__(self, verifier: Verifier, settings=None, *, partner: Verifier | None = None, m: int = 10,
                 temperature: float = 1.0, top_p: float = 1.0, top_k: int = 40, max_tokens: int = 64,
                 distance_threshold: float = 0.5):
        if m < 1:
            raise ValueError(f"visplay_questioner: m={m} must be at least 1.")
        self.partner = partner or verifier
        self.sampling = Sampling(temperature=temperature, top_p=top_p, top_k=top_k, max_tokens=max_tokens, n=m)
        self.distance_threshold = distance_threshold

    def score(self, groups: Sequence[Group]) -> tuple[list[GroupResult], StepStats]:
        stats = StepStats(groups=len(groups))
        proposals = [[parse_questioner(text) for text in g.completions] for g in groups]
        index, requests = [], []
        for gi, group in enumerate(groups):
            context = strip_instruction(group.context, QUESTIONER_USER_PROMPT)
            for ri, proposal in enumerate(proposals[gi]):
                if proposal is not None:
                    index.append((gi, ri))
                    requests.append(Request(scorer_messages(context, proposal, group.labels), self.sampling,
                                            stage="visplay_reasoner", media=group.media))
        replies = self.partner.generate(requests)
        shares: dict[tuple[int, int], float | None] = {}
        for key, reply in zip(index, replies, strict=True):
            if reply.error is not None or not reply.texts:
                shares[key] = None
                stats.verdict_failures["partner_error"] += 1
                continue
            shares[key] = consistency([vote_key(t, groups[key[0]].labels) for t in reply.texts])
            stats.tests_validated += len(reply.texts)
        results = []
        for gi, group in enumerate(groups):
            r_unc, questions = [], []
            for ri, proposal in enumerate(proposals[gi]):
                questions.append(proposal.question if proposal else None)
                if proposal is None:
                    r_unc.append(-1.0)
                    stats.extra["unparsed"] += 1
                elif shares[(gi, ri)] is None:
                    r_unc.append(None)  # the partner failed: no signal for this rollout
                else:
                    r_unc.append(uncertainty_reward(shares[(gi, ri)]))
            c = [shares.get((gi, ri)) for ri in range(len(group.completions))]
            stats.statuses["scored"] += 1
            results.append(reward_result(list(r_unc), "scored", {"r_unc": r_unc, "questions": questions, "c": c}))
        return results, stats

    def finalize_batch(self, groups: Sequence[Group], results: list[GroupResult]) -> list[GroupResult]:
        """r_Q = r_unc - r_div, r_div the fraction of the step's rollouts in the rollout's BLEU cluster. Unparsed
        rollouts are singletons (VisPlay clusters their empty question, which matches nothing). Idempotent."""
        flat = [(gi, ri, q) for gi, r in enumerate(results) for ri, q in enumerate(r.extra.get("questions", []))]
        parsed = [(gi, ri, q) for gi, ri, q in flat if q is not None]
        total = len(flat)
        shares = cluster_shares([q for _, _, q in parsed], self.distance_threshold) if parsed else []
        by_key = {(gi, ri): share * len(parsed) / total for (gi, ri, _), share in zip(parsed, shares, strict=True)}
        for gi, result in enumerate(results):
            if "r_unc" not in result.extra:
                continue
            penalties = [by_key.get((gi, ri), 1.0 / total) for ri in range(len(result.extra["r_unc"]))]
            result.extra["r_div"] = penalties
            pairs = zip(result.extra["r_unc"], penalties, strict=True)
            result.verified = [None if u is None else u - p for u, p in pairs]
        return results


# -- between the phases -----------------------------------------------------------------------------------------------
def build_reasoner_rows(
    clip_rows: Sequence[dict], questioner: Verifier, reasoner: Verifier, *, n_candidates: int = 8, m: int = 9,
    lo: float = 0.3, hi: float = 0.8, cap: int | None = 600, seed: int = 0, n_clips: int | None = 1000,
    hard_drop_match: str = "literal", questioner_max_tokens: int = 512, reasoner_max_tokens: int = 64,
) -> tuple[list[dict], dict]:
    """D_{t+1} for the Reasoner: the frozen Questioner writes `n_candidates` questions for each of `n_clips` seeded
    clips (one call; T 1.0, top-p 0.95 as VisPlay's generation script), the frozen Reasoner answers each parsed one
    `m` times (one call; T 1.0, top-p 1.0, top-k 40), candidates outside `lo <= c <= hi`, without a valid majority
    or hit by a hard drop are dropped, and at most `cap` are kept (a seeded draw).

    Returns `(rows, stats)`: Reasoner rows ([`reasoner_row`]) and `clips`, `generated`, `parsed`, `retained`,
    `retained_fraction` (retained / generated), `dropped` (count by reason).
    """
    if hard_drop_match not in HARD_DROP_MATCHES:
        raise ValueError(f"hard_drop_match={hard_drop_match!r}: use one of {', '.join(HARD_DROP_MATCHES)}.")
    check_builder_inputs(clip_rows, "build_reasoner_rows", n_candidates=n_candidates, m=m, n_clips=n_clips, lo=lo,
                         hi=hi)
    clips = seeded_subset(clip_rows, n_clips, seed)
    rows_q = [questioner_row(row) for row in clips]
    q_sampling = Sampling(temperature=1.0, top_p=0.95, max_tokens=questioner_max_tokens, n=n_candidates)
    q_replies = ask(questioner, rows_q, clips, q_sampling, "visplay_generate")
    dropped: Counter = Counter()
    candidates = []  # (clip row, proposal)
    for clip, reply in zip(clips, q_replies, strict=True):
        texts = list(reply.texts) + [""] * (n_candidates - len(reply.texts))
        for j, text in enumerate(texts[:n_candidates]):
            proposal = parse_questioner(text) if reply.error is None else None
            if proposal is None:
                dropped["questioner_error" if reply.error is not None else "unparsed"] += 1
            else:
                candidates.append(({**clip, "id": f"{clip.get('id', '')}/q{j}"}, proposal))
    r_sampling = Sampling(temperature=1.0, top_p=1.0, top_k=40, max_tokens=reasoner_max_tokens, n=m)
    drafts = [reasoner_row(clip, p.question, "", 0.0) for clip, p in candidates]
    r_replies = ask(reasoner, drafts, [c for c, _ in candidates], r_sampling, "visplay_pseudo_label")
    kept = []
    for (clip, proposal), reply in zip(candidates, r_replies, strict=True):
        if reply.error is not None or not reply.texts:
            dropped["reasoner_error"] += 1
            continue
        labels = clip.get("answer_options") or None
        votes = [vote_key(t, labels) for t in reply.texts]
        answer, count, _ = majority_vote(votes)
        c = count / len(votes)
        if labels is None and answer not in (None, NONE_ANSWER):  # the pseudo-label as written, not its normal form
            answer = next(last_boxed(t) for t, v in zip(reply.texts, votes, strict=True) if v == answer)
        reason = retention_reason(proposal.question, answer, c, lo, hi, hard_drop_match)
        if reason:
            dropped[reason] += 1
        else:
            kept.append(reasoner_row(clip, proposal.question, answer, c))
    if cap is not None and len(kept) > cap:
        dropped["over_cap"] += len(kept) - cap
        kept = seeded_subset(kept, cap, seed + 1)
    return kept, builder_stats(clips, len(clips) * n_candidates, len(candidates), kept, dropped)
