"""RLAC, the adversarial critic (RLCE paper App. D.6, Algorithm 4, Table 15; spec next-capabilities §5.2).

Two trained roles from one backbone and a frozen validator:

- **Generator phase** ([`RLACGeneratorScorer`], `reward_method="rlac_generator"`): every rollout is attacked by the
  frozen critic (the `partner`, proposal temperature 1.2), the claim is meta-verified, then ruled on by the frozen
  validator (the `verifier`, greedy, 256 tokens), who sees the sample context and the claim, never the response, and
  is not told that a critic proposed it.
- **Harvest** ([`critic_rows`]): one pair per clip from the new generator, at most `M` (the paper: 600).
- **Critic phase** ([`RLACCriticScorer`], `reward_method="rlac_critic"`): the completions are critiques of the
  harvested responses; the same meta-verification and validation decide them.

Rewards ([`generator_rewards`], [`critic_reward`]; `u` = "the claim survives meta-verification and is then ruled
unsupported"): the implemented reading, since the paper's literal `r_G = 1 - R` makes a well-formed losing rollout
score below a malformed one, contradicting its own text. No verdict (the critique has no SPAN / CLAIM, or the
meta-verifier or the validator gives no readable decision): the critic scores 0, the generator the mean reward of its
group's rollouts that have a verdict (advantage 0).

Meta-verification (text-only, two strings, [`meta_shortcut`]): the quoted SPAN must occur in the response (else the
critic quoted text the response never had); then the CLAIM must originate in the span: an exact (normalised)
substring passes at once, anything else goes to one batched paraphrase check by the verifier.

Every prompt here is ours [ours]: the paper's figures did not survive extraction and RLAC has no public code. Stages,
each ONE batched call per step: `rlac_critic` (partner; generator phase only), `rlac_meta`, `rlac_validate`.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..data.media import video_blocks
from ..evidence.prompts import cap_answer, render_context
from ..scoring import Group, GroupResult, ScorerBase, StepStats
from ..verifiers.base import Request, Sampling, Verifier
from .baseline_prompts import YES_NO, parse_yes_no
from .common import read_reply, reward_result

#: [ours] Appended to the generator's system prompt (the paper names the tags, not the wording).
GENERATOR_INSTRUCTION = (
    "Write your final answer inside <answer></answer>, then justify it in one to three sentences inside "
    "<justification></justification>. Write nothing else."
)
#: [ours] The critic's instructions; the three labelled lines are ours (the paper does not name its labels).
CRITIC_SYSTEM = (
    "You are a critic. You read some material (a conversation, a transcript or a video clip), a question about it, "
    "and a response to the question. Find the single claim in the response that is most likely wrong or not "
    "supported by the material. Reply with exactly three lines:\n"
    "SPAN: <an exact quote from the response that makes the claim>\n"
    "CLAIM: <that claim, stated on its own>\n"
    "WHY: <one sentence on why it is likely wrong>"
)
CRITIC_USER = (
    "{context}\n\nResponse to check:\n{response}\n\n"
    "Name the single claim this response most likely gets wrong, in the three lines SPAN:, CLAIM: and WHY:."
)
#: [ours] Meta-verification: text-only, two strings, no clip.
META_USER = (
    "Quote: {span}\n\nClaim: {claim}\n\n"
    "Does the claim state something that the quote says (the same assertion, possibly in other words)? "
    "Answer Yes or No."
)
#: [ours] Validation: the sample context and the claim only; no response, no mention of a critic.
VALIDATE_USER = (
    "{context}\n\nStatement: {claim}\n\n"
    "Is the statement supported by the material above? Answer Yes or No."
)

U_WEIGHT, FORMAT_WEIGHT = 0.8, 0.2
_GENERATOR_FORMAT = re.compile(r"^\s*<answer>(.+?)</answer>\s*<justification>(.+?)</justification>\s*$", re.S | re.I)
_LABELLED = re.compile(r"^[\s>*_#-]*(SPAN|CLAIM|WHY)[*_]*\s*:[*_]*\s*(.*)$", re.I)
_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'", "`": "'"})


def generator_format(text: str) -> bool:
    """`<answer>..</answer>` then `<justification>..</justification>`, both non-empty, nothing else."""
    match = _GENERATOR_FORMAT.match(text)
    return bool(match and match.group(1).strip() and match.group(2).strip())


@dataclass(frozen=True)
class Critique:
    """A parsed critique: the quoted span, the claim, the reason; `well_formed` when the reply is exactly the three
    labelled lines (the format term)."""

    span: str
    claim: str
    why: str
    well_formed: bool


def parse_critique(text: str) -> Critique | None:
    """The critique in `text`, or `None` when it has no non-empty SPAN and CLAIM (no verdict is possible)."""
    fields: dict[str, str] = {}
    other = 0
    for line in text.strip().splitlines():
        if not line.strip():
            continue
        match = _LABELLED.match(line)
        if match and match.group(1).upper() not in fields:
            fields[match.group(1).upper()] = match.group(2).strip().strip("*_").strip()
        else:
            other += 1
    span, claim, why = (fields.get(k, "") for k in ("SPAN", "CLAIM", "WHY"))
    span = span.strip().strip("\"'\u201c\u201d\u2018\u2019").strip()
    if not span or not claim:
        return None
    return Critique(span, claim, why, well_formed=bool(why) and other == 0)


def normalise(text: str) -> str:
    """Case, quotes, whitespace and edge punctuation folded, for the exact-substring checks."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
    return " ".join(text.split()).strip(" .,;:!?\"'")


def meta_shortcut(critique: Critique, response: str) -> bool | None:
    """The exact-substring stage of meta-verification: `False` when the span is not in the response, `True` when the
    claim is a substring of the span, `None` when the paraphrase check must decide."""
    span = normalise(critique.span)
    if not span or span not in normalise(response):
        return False
    return True if normalise(critique.claim) in span else None


@dataclass
class Exchange:
    """One critique of one response and how it was decided. `u`: `True` (claim survived and ruled unsupported),
    `False` (rejected by meta-verification, or ruled supported), `None` (no verdict)."""

    context: str
    response: str
    critique_text: str
    media: list[dict] | None = None
    critique: Critique | None = None
    stage: str = "critic"  # where it was decided: critic (unparseable), meta, validate
    u: bool | None = None


def decide(exchanges: Sequence[Exchange], verifier: Verifier, meta_max_tokens: int, validator_max_tokens: int,
           stats: StepStats) -> None:
    """Meta-verify and validate every exchange in place: one batched call per stage (none when nothing needs it)."""
    pending, survivors = [], []
    for ex in exchanges:
        ex.critique = parse_critique(ex.critique_text)
        if ex.critique is None:
            stats.verdict_failures["critique_unparseable"] += 1
            continue
        ex.stage = "meta"
        shortcut = meta_shortcut(ex.critique, ex.response)
        if shortcut is False:
            ex.u = False
            stats.extra["meta_rejected"] += 1
        elif shortcut is None:
            pending.append(ex)
        else:
            stats.extra["meta_exact"] += 1
            survivors.append(ex)
    meta_requests = [
        Request([{"role": "user", "content": META_USER.format(span=cap_answer(ex.critique.span),
                                                              claim=cap_answer(ex.critique.claim))}],
                Sampling(max_tokens=meta_max_tokens), choices=YES_NO, stage="rlac_meta")
        for ex in pending
    ]
    for ex, reply in zip(pending, verifier.generate(meta_requests), strict=True):
        verdict = read_reply(reply, parse_yes_no, stats, "meta_unreadable")
        stats.extra["meta_paraphrase_checks"] += 1
        if verdict == "yes":
            survivors.append(ex)
        elif verdict == "no":
            ex.u = False
            stats.extra["meta_rejected"] += 1
    requests = [
        Request([{"role": "user", "content": VALIDATE_USER.format(context=ex.context,
                                                                  claim=cap_answer(ex.critique.claim))}],
                Sampling(max_tokens=validator_max_tokens), choices=YES_NO, stage="rlac_validate", media=ex.media)
        for ex in survivors
    ]
    for ex, reply in zip(survivors, verifier.generate(requests), strict=True):
        verdict = read_reply(reply, parse_yes_no, stats, "validator_unreadable")
        ex.stage = "validate"
        stats.tests_validated += 1
        stats.verdicts[{"yes": "supported", "no": "unsupported"}.get(verdict, "invalid")] += 1
        if verdict is not None:
            ex.u = verdict == "no"


def critic_reward(ex: Exchange) -> float:
    """r_C = 0.8 * 1[u] + 0.2 * 1[fmt_C]; 0 without a verdict."""
    if ex.u is None:
        return 0.0
    return U_WEIGHT * ex.u + FORMAT_WEIGHT * bool(ex.critique and ex.critique.well_formed)


def generator_rewards(exchanges: Sequence[Exchange]) -> list[float | None]:
    """r_G = 0.8 * (1 - 1[u]) + 0.2 * 1[fmt_G] per rollout; a rollout without a verdict gets the mean of the others
    (advantage 0); all `None` when no rollout has one."""
    decided = [U_WEIGHT * (not ex.u) + FORMAT_WEIGHT * generator_format(ex.response) if ex.u is not None else None
               for ex in exchanges]
    known = [r for r in decided if r is not None]
    if not known:
        return [None] * len(decided)
    mean = sum(known) / len(known)
    return [mean if r is None else r for r in decided]


class _RLACScorer(ScorerBase):
    verifier: Verifier
    meta_max_tokens: int
    validator_max_tokens: int

    def _results(self, per_group: list[list[Exchange]], stats: StepStats,
                 rewards: Callable[[list[Exchange]], list[float | None]]) -> list[GroupResult]:
        """Decide every exchange of the step ([`decide`]), count the outcomes, reward each group with `rewards`."""
        flat = [ex for exchanges in per_group for ex in exchanges]
        decide(flat, self.verifier, self.meta_max_tokens, self.validator_max_tokens, stats)
        for ex in flat:
            stats.extra["no_verdict" if ex.u is None else "u_unsupported" if ex.u else "u_survived"] += 1
        results = []
        for exchanges in per_group:
            stats.distinct_answers.append(len(exchanges))
            status = "no_verdict" if all(ex.u is None for ex in exchanges) else "decided"
            outcomes = [{"u": ex.u, "stage": ex.stage, "span": ex.critique.span if ex.critique else None,
                         "claim": ex.critique.claim if ex.critique else None} for ex in exchanges]
            results.append(reward_result(rewards(exchanges), status, {"rlac": outcomes}))
        return results


class RLACGeneratorScorer(_RLACScorer):
    """The generator phase: every rollout attacked by the frozen critic, decided by meta-verifier and validator.

    Args:
        verifier: the frozen validator and meta-verifier (the initial backbone).
        settings: unused (the scorer seam's signature).
        partner: the frozen critic `C_t`; `None` uses `verifier` (round 0, where `C_0` is the backbone, or the
            "RLAC-frozen-critic" single-model variant).
        critic_temperature / critic_top_p / critic_max_tokens: the critic's proposal sampling (Table 15: 1.2).
        meta_max_tokens / validator_max_tokens: reply limits (Table 15: the validator is greedy, 256 tokens).
    """

    name = "rlac_generator"

    def __init__(self, verifier: Verifier, settings=None, *, partner: Verifier | None = None,
                 critic_temperature: float = 1.2, critic_top_p: float = 1.0, critic_max_tokens: int = 256,
                 meta_max_tokens: int = 8, validator_max_tokens: int = 256):
        self.verifier, self.partner = verifier, partner if partner is not None else verifier
        self.critic_sampling = Sampling(temperature=critic_temperature, top_p=critic_top_p,
                                        max_tokens=critic_max_tokens)
        self.meta_max_tokens, self.validator_max_tokens = meta_max_tokens, validator_max_tokens

    def score(self, groups: Sequence[Group]) -> tuple[list[GroupResult], StepStats]:
        stats = StepStats(groups=len(groups))
        per_group = [[Exchange(g.context, text, "", g.media) for text in g.completions] for g in groups]
        flat = [ex for exchanges in per_group for ex in exchanges]
        # the frozen critic reads the same prompt the critic trains on
        requests = [Request(critic_messages(ex.context, ex.response), self.critic_sampling, stage="rlac_critic",
                            media=ex.media) for ex in flat]
        for ex, reply in zip(flat, self.partner.generate(requests), strict=True):
            ex.critique_text = reply.texts[0] if reply.texts and reply.error is None else ""
        stats.tests_built = len(flat)
        return self._results(per_group, stats, generator_rewards), stats


class RLACCriticScorer(_RLACScorer):
    """The critic phase: the completions are critiques of the harvested response (dataset columns `rlac_response`,
    the response, and `rlac_context`, the sample context the validator sees). Args as [`RLACGeneratorScorer`]; the
    critic phase needs no partner."""

    name = "rlac_critic"
    columns = ("rlac_response", "rlac_context")

    def __init__(self, verifier: Verifier, settings=None, *, partner: Verifier | None = None,
                 meta_max_tokens: int = 8, validator_max_tokens: int = 256):
        self.verifier = verifier
        self.meta_max_tokens, self.validator_max_tokens = meta_max_tokens, validator_max_tokens

    def score(self, groups: Sequence[Group]) -> tuple[list[GroupResult], StepStats]:
        stats = StepStats(groups=len(groups))
        per_group = []
        for g in groups:
            columns = g.columns or {}
            if not isinstance(columns.get("rlac_response"), str) or not isinstance(columns.get("rlac_context"), str):
                raise ValueError("rlac_critic needs the dataset columns rlac_response and rlac_context (the rows that "
                                 "rlce_trl.methods.rlac.critic_rows writes): train the critic on harvested pairs.")
            per_group.append([Exchange(columns["rlac_context"], columns["rlac_response"], text, g.media)
                              for text in g.completions])
        return self._results(per_group, stats, lambda exchanges: [critic_reward(ex) for ex in exchanges]), stats


def critic_messages(context: str, response: str) -> list[dict]:
    return [{"role": "system", "content": CRITIC_SYSTEM},
            {"role": "user", "content": CRITIC_USER.format(context=context, response=cap_answer(response))}]


# -- data between phases ---------------------------------------------------------------------------------------------
def generator_rows(rows: Sequence[dict]) -> list[dict]:
    """The generator phase's rows: each row's prompt with [`GENERATOR_INSTRUCTION`] added to its system message (one
    is added when there is none), so the critic and the validator, which read the context without system messages,
    never see it."""
    out = []
    for row in rows:
        prompt = [dict(m) for m in row["prompt"]]
        if prompt and prompt[0]["role"] == "system":
            content = prompt[0]["content"]
            if isinstance(content, str):
                prompt[0]["content"] = f"{content}\n\n{GENERATOR_INSTRUCTION}"
            else:
                prompt[0]["content"] = [*content, {"type": "text", "text": f"\n\n{GENERATOR_INSTRUCTION}"}]
        else:
            prompt.insert(0, {"role": "system", "content": GENERATOR_INSTRUCTION})
        out.append({k: v for k, v in row.items() if k != "gold"} | {"prompt": prompt})
    return out


def pick_clips(rows: Sequence[dict], max_pairs: int, seed: int) -> list[dict]:
    """At most `max_pairs` rows, one per clip (row), in a seeded order (the paper: M = 600, one pair per clip)."""
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    return [rows[i] for i in sorted(order[:max_pairs])]


def critic_rows(rows: Sequence[dict], responses: Sequence[str]) -> list[dict]:
    """The critic phase's rows: per generator row and the new generator's response to it, the critic prompt (clip
    blocks kept, so the critic sees the clip) and the columns the critic scorer reads."""
    if len(rows) != len(responses):
        raise ValueError(f"{len(rows)} rows but {len(responses)} responses.")
    out = []
    for row, response in zip(rows, responses, strict=True):
        context = render_context(row["prompt"])
        messages = critic_messages(context, response)
        videos = video_blocks(row["prompt"])
        if videos:
            messages[1]["content"] = [*videos, {"type": "text", "text": messages[1]["content"]}]
        kept = {k: v for k, v in row.items() if k in ("id", "task", "form", "topic", "question", "videos")}
        out.append({**kept, "prompt": messages, "answer_options": [], "rlac_response": response,
                    "rlac_context": context})
    return out
