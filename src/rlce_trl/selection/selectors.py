"""Selectors over a shared candidate pool: `select(items) -> [Selection]`, one item = (pool row, candidate subset).

| name             | picks                                                                  | verifier calls |
|------------------|------------------------------------------------------------------------|----------------|
| `greedy`         | the greedy (temperature 0) answer; ignores the subset                  | none           |
| `single`         | the subset's first candidate (a random one: the reference "random@b") | none           |
| `majority`       | the most frequent answer, first-seen on ties                           | none           |
| `rlce`, `usc`, ... | any REWARD_METHODS scorer: its `verified_answer` for the subset     | one per stage  |
| `elect`          | Elect's adaptive election (paper §4.2), greedy run first, K <= budget  | referee: one batched |
| `elect_noframes` | the same with S_i = 1/3 (tau + 1 - rho + c) and no frame Jaccard       | as `elect`     |
| `oracle`         | the gold answer when any candidate has it (an upper bound)             | none           |

Fallbacks of the scorer selectors [ours], recorded in `Selection.status`: one distinct answer -> it
(`single_answer`); no verified answer -> majority (`fallback_majority`); no parseable candidate -> the greedy answer
(`fallback_greedy`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from ..data.media import media_items
from ..elect.election import (
    Candidate,
    ElectConfig,
    evidence_score,
    needs_referee,
    referee_step,
    run_election,
)
from ..evidence.prompts import render_context
from ..evidence.votes import majority
from ..scoring import Group
from ..verifiers.base import Request, Sampling, Verifier
from .pool import PoolCandidate, PoolRow

Item = tuple[PoolRow, Sequence[int]]


@dataclass
class Selection:
    answer: str | None
    status: str = "selected"
    samples: int = 0  # candidates the selector consumed (Elect's adaptive K)


def _answers(row: PoolRow, subset: Sequence[int]) -> list[str | None]:
    return [row.candidates[i].answer for i in subset]


def majority_answer(answers: Sequence[str | None]) -> str | None:
    """Majority-vote selection: tie rule "first", the tied answer sampled first wins (Elect's majority baseline)."""
    return majority(answers, tie="first")


class GreedySelector:
    name = "greedy"

    def select(self, items: Sequence[Item]) -> list[Selection]:
        return [Selection(row.greedy.answer, "selected", 1) if row.greedy else Selection(None, "no_greedy", 0)
                for row, _ in items]


class SingleSelector:
    name = "single"

    def select(self, items: Sequence[Item]) -> list[Selection]:
        return [Selection(row.candidates[subset[0]].answer, "selected", 1) for row, subset in items]


class MajoritySelector:
    name = "majority"

    def select(self, items: Sequence[Item]) -> list[Selection]:
        answers = [(majority_answer(_answers(row, subset)), len(subset)) for row, subset in items]
        return [Selection(answer, "selected" if answer is not None else "no_answer", n) for answer, n in answers]


class OracleSelector:
    name = "oracle"

    def select(self, items: Sequence[Item]) -> list[Selection]:
        out = []
        for row, subset in items:
            answers = _answers(row, subset)
            hit = next((a for a in answers if row.is_correct(a)), None)
            out.append(Selection(hit if hit is not None else majority_answer(answers), "selected", len(subset)))
        return out


class ScorerSelector:
    """Any group scorer of `rlce_trl.methods.REWARD_METHODS` as a selector (RLCE best-of-n for `rlce`). Candidates
    whose answer was parsed are shown to the scorer with that answer appended as `\\boxed{}`, so the scorer's
    extraction agrees with the pool's."""

    def __init__(self, name: str, verifier: Verifier, settings=None, **options):
        from ..methods import build_scorer

        self.name, self.verifier = name, verifier
        self.scorer = build_scorer(name, verifier, settings, **options)

    @staticmethod
    def _text(c: PoolCandidate) -> str:
        return c.text if c.answer is None else f"{c.text}\n\\boxed{{{c.answer}}}"

    def select(self, items: Sequence[Item]) -> list[Selection]:
        groups = [Group(context=render_context(row.prompt),
                        completions=[self._text(row.candidates[i]) for i in subset], labels=row.labels,
                        question=row.question, key=f"{row.id}:{','.join(map(str, subset))}",
                        media=media_items(row.prompt))  # a video row's clip: every verifier stage sees it
                  for row, subset in items]
        results, _ = self.scorer.score(groups)
        out = []
        for (row, subset), result in zip(items, results, strict=True):
            answers = _answers(row, subset)
            distinct = {a for a in answers if a is not None}
            if result.verified_answer is not None:
                out.append(Selection(result.verified_answer, "selected", len(subset)))
            elif len(distinct) == 1:
                out.append(Selection(distinct.pop(), "single_answer", len(subset)))
            elif distinct:
                out.append(Selection(majority_answer(answers), "fallback_majority", len(subset)))
            else:
                out.append(Selection(row.greedy.answer if row.greedy else None, "fallback_greedy", len(subset)))
        return out


REFEREE_PROMPT = (
    "{context}\n\nProposed answer: {answer}\nCited evidence (by number): {frames}\n\nCheck only whether the cited "
    "evidence is sufficient to support the proposed answer, and whether something it needs is missing. Reply with "
    "one word: supported, partially or unsupported."
)
REFEREE_DELTA = {"supported": 0.0, "partially": -0.5, "unsupported": -1.0}  # times S(a*) [ours]


class ElectSelector:
    """Elect's adaptive election over a pool: the greedy run first (the paper's "conservative run"), then the
    subset's candidates in order, K <= budget, stop rule and trimming per `cfg`; with a `referee` verifier, one
    batched Eq. 19 check for the items that have a runner-up."""

    def __init__(self, cfg: ElectConfig | None = None, referee: Verifier | None = None, tokenizer=None,
                 name: str | None = None):
        self.cfg, self.referee, self.tokenizer = cfg or ElectConfig(), referee, tokenizer
        self.name = name or ("elect" if self.cfg.use_frames else "elect_noframes")

    def candidate(self, c: PoolCandidate) -> Candidate:
        return Candidate(c.answer, c.parse.keyframes, evidence_score(c.parse, c.confidence, self.cfg, self.tokenizer),
                         c.confidence, c.parse.has_keyframes and c.parse.format_ok)

    def select(self, items: Sequence[Item]) -> list[Selection]:
        runs = []
        for row, subset in items:
            order = [row.candidates[i] for i in subset]
            if row.greedy is not None:
                order = [row.greedy] + order[:-1]  # the conservative run counts against the budget
            order = [self.candidate(c) for c in order]

            def draw(i, order=order):
                return order[i] if i < len(order) else None

            cfg = dataclasses.replace(self.cfg, k_init=min(self.cfg.k_init, len(order)) or 1)
            outcome = run_election(draw, cfg, available=len(order))
            pool = order[: outcome.num_samples]
            runs.append((row, order, pool, outcome))
        if self.referee is not None:
            todo = [k for k, (*_, outcome) in enumerate(runs) if needs_referee(outcome)]
            requests = [self._referee_request(runs[k][0], runs[k][3]) for k in todo]
            replies = self.referee.generate(requests) if requests else []
            for k, reply in zip(todo, replies, strict=True):
                row, order, pool, outcome = runs[k]
                word = (reply.texts[0] if reply.texts else "").strip().lower()
                factor = next((v for w, v in REFEREE_DELTA.items() if word.startswith(w)), 0.0)
                delta = factor * outcome.election.answer_scores[outcome.election.winner]

                def grow(pool=pool, order=order):
                    if len(pool) < len(order):
                        pool.append(order[len(pool)])
                    return len(pool)

                runs[k] = (row, order, pool, referee_step(outcome, delta, grow, pool, self.cfg))
        return [Selection(o.answer, o.election.fallback or ("referee_flip" if o.referee_flip else "selected"),
                          o.num_samples) for *_, o in runs]

    def _referee_request(self, row: PoolRow, outcome) -> Request:
        e = outcome.election
        frames = ", ".join(map(str, sorted(e.consensus.get(e.winner, ())))) or "none"
        text = REFEREE_PROMPT.format(context=render_context(row.prompt), answer=e.winner, frames=frames)
        return Request([{"role": "user", "content": text}], Sampling(max_tokens=4),
                       choices=tuple(REFEREE_DELTA), stage="elect_referee", media=media_items(row.prompt))
