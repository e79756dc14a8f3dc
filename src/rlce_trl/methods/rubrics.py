"""Rubric rewards: static Rubrics as Rewards (RaR) and Evolving Rubrics (RLER of DR Tulu), paper appendix D.3.

Each prompt (keyed by `Group.prompt_key`) owns a buffer of rubrics `{"text": str, "weight": +1 | -1}` (positive
trait / failure): `persistent`, 3-5 seed rubrics written once by the frozen generator from the sample context and the
clip, never pruned; `active` (Evolving only), rubrics of earlier visits that survived pruning, at most 5; `archived`,
pruned rubrics, kept for inspection. One step, for all groups at once, one batched `generate` per stage (Algorithm
1; Static skips lines 10 and 13):

1. seed: groups whose prompt has no persistent rubrics yet (one request per prompt);
2. generate (Evolving): per group, 0-5 new candidate rubrics `N` from the context, the clip, the rollouts and the
   buffer;
3. judge: every rubric of `P ∪ A ∪ N` against every distinct non-empty response, text-only, greedy, guided choice
   0/1/2; `J = score / 2`; an unreadable reply or an empty response scores 0. The judge's question is D.3's task
   question: the dataset's one question for a known closed label set (MOSEI, UR-FUNNY; not the row's transcript),
   else the row's question, plus the response-shape sentence ([`prompts.rubric_task_question`]);
4. reward: [`rubric_score`], DR Tulu's Eq. 1 (can be negative). The trainer adds the format reward itself, so
   `verified = S_rubric` is the `0.8 S` part of `r = 0.8 S_rubric + 0.2 r_format`; D.3's `r_format` is
   [`rubric_format`], which `RLCEGRPOTrainer` uses for these methods instead of RLCE's `\\boxed{}` term
   ([`RubricScorer.format_reward`]); the policy is asked for that shape by [`rubric_rows`]
   ([`RubricScorer.policy_rows`], applied by the training scripts);
5. prune (Evolving): [`prune`] the rubrics of `A ∪ N` by the population standard deviation of their `J` over the
   group's rollouts. Persistent rubrics are exempt.

State across steps is plain JSON: `pop_state_updates()` returns the buffer changes made since the last call
(`{"key", "persistent"}` after a seed, `{"key", "active", "archived"}` after a prune), `apply_state_updates` merges
those of other processes, `state_dict` / `load_state_dict` save and restore all buffers with checkpoints.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from ..evidence.answers import match_label
from ..evidence.canonicalization import canonicalize_deterministic
from ..evidence.pipeline import EvidenceSettings
from ..evidence.state import GroupState
from ..scoring import Group, GroupResult, ScorerBase, StepStats
from ..verifiers.base import Request, Sampling, Verifier
from .baseline_prompts import (
    RUBRIC_SCORES,
    parse_rubric_score,
    parse_rubrics,
    rubric_generation_messages,
    rubric_judge_messages,
    rubric_key,
    rubric_policy_system,
    rubric_schema,
    rubric_seed_messages,
    rubric_task_question,
)
from .common import QuestionFn, group_question, make_result, no_reward, only_answer, read_reply

#: Standard deviations below this are zero: J takes the values 0, 0.5 and 1 only.
STD_TOLERANCE = 1e-12


def rubric_score(weights: Sequence[float], judgments: Sequence[float]) -> float:
    """`S_rubric(y) = sum_k w_k J(r_k, y) / max(sum_{k: w_k > 0} w_k, 1)` (DR Tulu Eq. 1, paper appendix D.3).

    The denominator counts positive weights only; the score is not clamped and is negative when penalties dominate.
    """
    positive = sum(w for w in weights if w > 0)
    return sum(w * j for w, j in zip(weights, judgments, strict=True)) / max(positive, 1.0)


def population_std(values: Sequence[float]) -> float:
    """Population standard deviation (ddof = 0), the pruning criterion of D.3."""
    if not values:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def prune(candidates: Sequence[dict], stds: Sequence[float], keep: int = 5) -> tuple[list[dict], list[dict]]:
    """D.3 pruning: `(active, archived)`. Zero-std rubrics are archived; of the rest the top `keep` by std stay
    active (ties keep their order, so older rubrics win), the others are archived."""
    ranked = sorted(range(len(candidates)), key=lambda k: -stds[k])  # sorted() is stable
    alive = [k for k in ranked if stds[k] > STD_TOLERANCE][:keep]
    kept = set(alive)
    return [candidates[k] for k in alive], [candidates[k] for k in range(len(candidates)) if k not in kept]


_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)
_JUSTIFICATION_TAG = re.compile(r"<justification>(.*?)</justification>", re.S | re.I)


def rubric_format_ok(text: str, labels: Sequence[str] | None = None) -> bool:
    """D.3's format check: exactly one `<answer>` whose content is exactly one label of `labels` (free text: is not
    empty) and exactly one non-empty `<justification>`."""
    answers, justifications = _ANSWER_TAG.findall(text), _JUSTIFICATION_TAG.findall(text)
    if len(answers) != 1 or len(justifications) != 1 or not answers[0].strip() or not justifications[0].strip():
        return False
    return match_label(answers[0], labels) is not None if labels else True


def rubric_format(completions, answer_options=None, **kwargs) -> list[float]:
    """The rubric baselines' `r_format` (D.3) as a TRL reward function: 1.0 per completion that passes
    [`rubric_format_ok`] with its row's `answer_options`, else 0.0."""
    from ..data.prompts import completion_text

    rows = answer_options if answer_options is not None else [None] * len(completions)
    return [float(rubric_format_ok(completion_text(c), labels or None))
            for c, labels in zip(completions, rows, strict=True)]


def _source(prompt) -> str:
    """Where a row's evidence comes from, for the response-shape sentence: "clip" when it has a video block."""
    from ..data.media import video_blocks

    return "clip" if video_blocks(prompt) else "input"


def rubric_rows(rows: Sequence[dict], labels_column: str = "answer_options") -> list[dict]:
    """The rubric baselines' training rows (D.3): each prompt's system message becomes [`rubric_policy_system`]
    (the response-shape sentence and the `<answer>` / `<justification>` tags the format term checks) instead of the
    solver's `\\boxed{}` instruction; a row without a system message gets one."""
    out = []
    for row in rows:
        prompt = [dict(m) for m in row["prompt"]]
        system = rubric_policy_system(row.get(labels_column) or None, _source(prompt))
        if prompt and prompt[0]["role"] == "system":
            content = prompt[0]["content"]
            prompt[0]["content"] = system if isinstance(content, str) else [{"type": "text", "text": system}]
        else:
            prompt.insert(0, {"role": "system", "content": system})
        out.append({**row, "prompt": prompt})
    return out


def _empty_buffer() -> dict:
    return {"persistent": [], "active": [], "archived": []}


class RubricScorer(ScorerBase):
    """Rubric rewards with a per-prompt buffer; `evolving=False` is static Rubrics as Rewards, `True` is RLER.

    Args:
        verifier: the frozen model, used as rubric generator and as judge (greedy for both, Table 10).
        settings: [`~rlce_trl.evidence.pipeline.EvidenceSettings`]; `validation_max_tokens` caps a judge reply.
        evolving: generate per-visit rubrics and prune them (RLER) or keep the seed rubrics only (RaR).
        question_fn: `group -> question` shown to the text-only judge; defaults to the last user turn of the context.
        seed_rubrics: `(min, max)` persistent rubrics asked of the seed pass (3-5 in D.3).
        max_new_rubrics: per-visit rubrics asked at most (5).
        max_active: active rubrics kept after pruning (5).
        generator_max_tokens: token limit of a seed or per-visit generation reply.
        buffers: initial buffers, `{prompt key: {"persistent", "active", "archived"}}` (e.g. from a checkpoint).
    """

    #: D.3's format term, used by `RLCEGRPOTrainer` in place of RLCE's `\\boxed{}` one.
    format_reward = staticmethod(rubric_format)
    #: D.3's policy prompt, applied to the training rows by the training scripts.
    policy_rows = staticmethod(rubric_rows)

    def __init__(self, verifier: Verifier, settings: EvidenceSettings | None = None, evolving: bool = True,
                 question_fn: QuestionFn | None = None, seed_rubrics: tuple[int, int] = (3, 5),
                 max_new_rubrics: int = 5, max_active: int = 5, generator_max_tokens: int = 512,
                 buffers: dict | None = None):
        self.verifier = verifier
        self.settings = settings or EvidenceSettings()
        self.evolving = evolving
        self.name = "rler" if evolving else "rar"
        self.question_fn = question_fn
        self.seed_rubrics = tuple(seed_rubrics)
        self.max_new_rubrics = max_new_rubrics
        self.max_active = max_active
        self.generator_max_tokens = generator_max_tokens
        self.buffers: dict[str, dict] = buffers if buffers is not None else {}
        self._updates: list[dict] = []

    # -- the step ---------------------------------------------------------------------------------------------------
    def score(self, groups: Sequence[Group]) -> tuple[list[GroupResult], StepStats]:
        stats = StepStats(groups=len(groups))
        states = [canonicalize_deterministic(g, self.settings.answer_fallback) for g in groups]
        self._seed(states, stats)
        candidates = self._generate(states, stats) if self.evolving else [[] for _ in states]
        rubric_sets = [self._rubrics(s) + new for s, new in zip(states, candidates, strict=True)]
        judgments = self._judge(states, rubric_sets, stats)
        results = []
        for state, rubrics, judged in zip(states, rubric_sets, judgments, strict=True):
            stats.distinct_answers.append(state.num_answers)
            if not rubrics:
                result = no_reward(state, "no_rubrics")
            else:
                weights = [r["weight"] for r in rubrics]
                rewards = [rubric_score(weights, column) for column in zip(*judged, strict=True)]  # per rollout
                result = self._result(state, rewards)
                if self.evolving:
                    self._prune(state, rubrics, judged)
            stats.statuses[result.status] += 1
            results.append(result)
        return results, stats

    # -- stages -----------------------------------------------------------------------------------------------------
    def _seed(self, states: list[GroupState], stats: StepStats) -> None:
        todo: dict[str, GroupState] = {}
        for s in states:
            key = s.group.prompt_key
            if self.buffers.get(key, {}).get("persistent"):
                stats.extra["static_cache_hits"] += 1  # the persistent rubrics of an earlier visit are reused
            else:
                todo.setdefault(key, s)  # one seed request per prompt, even if it appears twice in the step
        low, high = self.seed_rubrics
        requests = [self._generation_request(rubric_seed_messages(s.group.context, low, high), low, high,
                                             "rubric_seed", s.group) for s in todo.values()]
        for key, reply in zip(todo, self.verifier.generate(requests), strict=True):
            rubrics, failure = self._parse(reply, high)
            if failure or not rubrics:  # retried on the next visit
                stats.construction_failures[f"seed_{failure or 'empty'}"] += 1
                continue
            stats.tests_built += len(rubrics)
            self._record({"key": key, "persistent": rubrics})

    def _generate(self, states: list[GroupState], stats: StepStats) -> list[list[dict]]:
        requests = [
            self._generation_request(
                rubric_generation_messages(s.group.context, s.group.completions, self._rubrics(s),
                                           self.max_new_rubrics),
                0, self.max_new_rubrics, "rubric_generation", s.group,
            )
            for s in states
        ]
        out = []
        for state, reply in zip(states, self.verifier.generate(requests), strict=True):
            rubrics, failure = self._parse(reply, self.max_new_rubrics)
            if failure:
                stats.construction_failures[f"generation_{failure}"] += 1
            known = {rubric_key(r["text"]) for r in self._rubrics(state)}
            new = [r for r in rubrics if rubric_key(r["text"]) not in known]
            stats.tests_built += len(new)
            out.append(new)
        return out

    def _generation_request(self, messages: list[dict], low: int, high: int, stage: str, group: Group) -> Request:
        """A seed or per-visit generation: greedy, a JSON list of `low` to `high` rubrics; D.3's generator reads the
        clip and its transcript."""
        return Request(messages=messages, sampling=Sampling(temperature=0.0, max_tokens=self.generator_max_tokens),
                       json_schema=rubric_schema(low, high), stage=stage, media=group.media)

    def _judge(self, states: list[GroupState], rubric_sets: list[list[dict]],
               stats: StepStats) -> list[list[list[float]]]:
        """`J[group][rubric][rollout]`; identical responses are judged once (greedy judging gives them one score)."""
        judged = [[[0.0] * len(s.group.completions) for _ in rubrics]
                  for s, rubrics in zip(states, rubric_sets, strict=True)]
        jobs: list[tuple[int, int, list[int]]] = []
        requests = []
        sampling = Sampling(temperature=0.0, max_tokens=self.settings.validation_max_tokens)
        for k, (state, rubrics) in enumerate(zip(states, rubric_sets, strict=True)):
            by_text: dict[str, list[int]] = {}
            for g, completion in enumerate(state.group.completions):
                if completion.strip():  # an empty response scores 0 without a call
                    by_text.setdefault(completion.strip(), []).append(g)
            question = self._judge_question(state.group)
            for text, rollouts in by_text.items():
                for r, rubric in enumerate(rubrics):
                    jobs.append((k, r, rollouts))
                    requests.append(Request(rubric_judge_messages(question, text, rubric["text"]), sampling,
                                            choices=RUBRIC_SCORES, stage="rubric_judge"))
        for (k, r, rollouts), reply in zip(jobs, self.verifier.generate(requests), strict=True):
            value = read_reply(reply, parse_rubric_score, stats, "unreadable_score")
            stats.tests_validated += 1
            stats.verdicts[f"score_{value}" if value is not None else "invalid"] += 1
            for g in rollouts:
                judged[k][r][g] = (value or 0) / 2  # 0/1/2 -> J in {0, 0.5, 1}; unreadable scores 0
        return judged

    def _judge_question(self, group: Group) -> str:
        """D.3's `{task question}` ([`rubric_task_question`]), or `question_fn(group)` when given."""
        if self.question_fn is not None:
            return self.question_fn(group)
        return rubric_task_question(group_question(group), group.labels, "clip" if group.media else "input")

    def _prune(self, state: GroupState, rubrics: list[dict], judged: list[list[float]]) -> None:
        key = state.group.prompt_key
        persistent = len(self.buffers.get(key, {}).get("persistent", []))
        pool = rubrics[persistent:]  # A ∪ N, in that order
        active, archived = prune(pool, [population_std(judged[persistent + k]) for k in range(len(pool))],
                                 self.max_active)
        self._record({"key": key, "active": active, "archived": archived})

    # -- buffers ----------------------------------------------------------------------------------------------------
    def _rubrics(self, state: GroupState) -> list[dict]:
        buffer = self.buffers.get(state.group.prompt_key, {})
        return list(buffer.get("persistent", [])) + list(buffer.get("active", []) if self.evolving else [])

    @staticmethod
    def _parse(reply, max_items: int) -> tuple[list[dict], str | None]:
        if reply.error is not None or not reply.texts:
            return [], "error"
        if reply.finish_reasons and reply.finish_reasons[0] == "length":
            rubrics, _ = parse_rubrics(reply.texts[0], max_items)  # a cut-off list keeps the rubrics it finished
            return (rubrics, None) if rubrics else ([], "runaway")
        return parse_rubrics(reply.texts[0], max_items)

    def _record(self, update: dict) -> None:
        self.apply_state_updates([update])
        self._updates.append(update)

    def apply_state_updates(self, updates: list[dict]) -> None:
        """Merge buffer changes made elsewhere (another process scored the prompt): a seed sets the persistent
        rubrics, a prune replaces the active set and appends to the archive."""
        for update in updates:
            buffer = self.buffers.setdefault(update["key"], _empty_buffer())
            if "persistent" in update:
                buffer["persistent"] = list(update["persistent"])
            if "active" in update:
                buffer["active"] = list(update["active"])
            buffer.setdefault("archived", []).extend(update.get("archived", []))

    def pop_state_updates(self) -> list[dict]:
        """The buffer changes made since the last call, to share with other processes."""
        updates, self._updates = self._updates, []
        return updates

    def state_dict(self) -> dict:
        """What a checkpoint keeps: every prompt's rubric buffer."""
        return {"rubrics": self.buffers}

    def load_state_dict(self, state: dict) -> None:
        for key, buffer in state.get("rubrics", {}).items():
            self.buffers[key] = {**_empty_buffer(), **buffer}

    def record_details(self, group: Group) -> dict | None:
        """The group's evidence record keeps its prompt's persistent and active rubrics."""
        buffer = self.buffers.get(group.prompt_key)
        if not buffer:
            return None
        return {"rubrics": {part: list(buffer.get(part, [])) for part in ("persistent", "active") if buffer.get(part)}}

    # -- output -----------------------------------------------------------------------------------------------------
    @staticmethod
    def _result(state: GroupState, rewards: list[float]) -> GroupResult:
        """Per answer, the mean rubric score of its rollouts; the verified answer is the unique best one."""
        scores: list[float | None] = []
        for i in range(state.num_answers):
            mine = [r for r, a in zip(rewards, state.assignment, strict=True) if a == i]
            scores.append(sum(mine) / len(mine) if mine else None)
        known = [s for s in scores if s is not None]
        best = [i for i, s in enumerate(scores) if known and s is not None and abs(s - max(known)) <= STD_TOLERANCE]
        return make_result(state, list(rewards), "scored", scores, only_answer(state, best))
