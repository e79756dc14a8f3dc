"""The preflight of `rlce-trl check`: one sampled step of the real training pipeline, without training.

Inside [`stop_before_training`] a training script runs as `rlce-trl train` would (its rows, the policy prompts, the
prompt filter, the trainer with its verifier and scorer) and hands the built trainer to a hook instead of training
it. [`sample_step`] is that hook's work: one group of rollouts for each of a few rows, generated and scored by the
trainer's own path, measured ([`PreflightResult`]) and judged by the trainer's own absolute signal verdict
([`~rlce_trl.health.signal.group_signal`]), with what to change.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from ..errors import InputError

_HOOK: ContextVar[Callable | None] = ContextVar("rlce_preflight_hook", default=None)


def preflight_hook() -> Callable | None:
    """The hook that receives the built trainer instead of training it (`None`: train as usual)."""
    return _HOOK.get()


@contextmanager
def stop_before_training(hook: Callable):
    """Inside this block the training pipeline builds its trainer and returns `hook(trainer)` instead of training
    (and writes nothing into the run's output folder)."""
    token = _HOOK.set(hook)
    try:
        yield
    finally:
        _HOOK.reset(token)


@dataclass
class PreflightResult:
    """What one sampled step showed.

    Attributes:
        prompts: each row's prompt as the policy saw it (TRL's rendered prompt tokens, decoded).
        messages: each row's prompt messages (before the chat template).
        completions: each row's group of completions.
        answers: each rollout's answer as the scorer read it (`None`: no answer).
        verdict: the absolute signal verdict (`rlce_trl.health.signal.SignalVerdict`).
        verdicts: the verifier's verdict counts in the step.
        seconds: generation and scoring of the step (the policy's and verifier's work; no backward pass).
        verifier_seconds: the verifier's share of `seconds` (`None`: the method logs none).
        clipped_share: share of completions cut at `max_completion_length`.
        checkpoint_bytes: the disk one checkpoint will take (weights, plus optimizer state unless
            `save_only_model`).
        hints: what to change, most specific first (empty with signal).
    """

    prompts: list[str]
    messages: list
    completions: list[list[str]]
    answers: list[list[str | None]]
    verdict: object
    verdicts: Counter
    seconds: float
    verifier_seconds: float | None
    clipped_share: float | None
    max_completion_length: int
    num_generations: int
    checkpoint_bytes: int
    hints: list[str] = field(default_factory=list)

    @property
    def distinct_answers(self) -> list[int]:
        return [len({a for a in group if a is not None}) for group in self.answers]


class _Observer:
    """Stands in the health monitor's place for the one step: keeps the groups and the verifier's verdict counts the
    trainer hands its monitor (`RLCEGRPOTrainer._calculate_rewards` -> `observe`)."""

    def __init__(self):
        self.summaries, self.verdicts = [], Counter()

    def observe(self, step, groups, results, verdicts=None) -> None:
        from ..health.metrics import summarize_group

        self.summaries += [summarize_group(g, r) for g, r in zip(groups, results, strict=True)]
        self.verdicts.update(verdicts or {})


def sample_step(trainer, rows: int) -> PreflightResult:
    """One group of `num_generations` rollouts for each of the first `rows` training rows, generated and scored by
    `trainer` exactly as a training step does (`GRPOTrainer._generate_and_score_completions`); nothing is trained."""
    from ..health.signal import group_signal

    if trainer.accelerator.num_processes > 1:  # every process would score every other's copy of the same groups
        raise InputError("rlce-trl check runs in one process: start it without accelerate launch / torchrun (one GPU "
                         "or the CPU is enough for a few rows).")
    dataset = trainer.train_dataset
    count = min(rows, len(dataset))
    size = trainer.num_generations
    inputs = [dataset[i] for i in range(count) for _ in range(size)]
    observer, monitor = _Observer(), trainer.health
    trainer.health = observer
    trainer.model.train()
    start = time.perf_counter()
    try:
        out = trainer._generate_and_score_completions(inputs)
    finally:
        trainer.health = monitor
    seconds = time.perf_counter() - start
    tokenizer = getattr(trainer.processing_class, "tokenizer", None) or trainer.processing_class
    prompts = [_decode(tokenizer, out["prompt_ids"][k * size], out["prompt_mask"][k * size]) for k in range(count)]
    texts = [_decode(tokenizer, ids, mask, skip_special=True)
             for ids, mask in zip(out["completion_ids"], out["completion_mask"], strict=True)]
    completions = [texts[k * size:(k + 1) * size] for k in range(count)]
    metrics = trainer._metrics["train"]
    clipped = metrics.get("completions/clipped_ratio") or [None]
    verifier = metrics.get(f"{trainer.method_name}/verifier_seconds") or [None]
    verdict = group_signal(observer.summaries, observer.verdicts or None)
    result = PreflightResult(
        prompts=prompts, messages=[inputs[k * size]["prompt"] for k in range(count)], completions=completions,
        answers=[s.answers for s in observer.summaries], verdict=verdict,
        verdicts=observer.verdicts or sum((s.verdicts for s in observer.summaries), Counter()), seconds=seconds,
        verifier_seconds=verifier[-1], clipped_share=clipped[-1],
        max_completion_length=trainer.args.max_completion_length, num_generations=size,
        checkpoint_bytes=checkpoint_bytes(trainer))
    result.hints = hints(result, trainer.args)
    return result


def _decode(tokenizer, ids, mask, skip_special: bool = False) -> str:
    kept = [int(t) for t, m in zip(ids.tolist(), mask.tolist(), strict=True) if m]
    return tokenizer.decode(kept, skip_special_tokens=skip_special)


def checkpoint_bytes(trainer) -> int:
    """The disk one checkpoint of this run takes: the weights as saved (a PEFT run: the adapter only; tied weights
    once), plus the optimizer's state (AdamW: two moments per trained parameter) unless `save_only_model`."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    peft = hasattr(model, "peft_config")
    seen, weights, trained = set(), 0, 0
    for parameter in model.parameters():
        if parameter.data_ptr() in seen:
            continue
        seen.add(parameter.data_ptr())
        size = parameter.numel() * parameter.element_size()
        trained += size if parameter.requires_grad else 0
        weights += size if parameter.requires_grad or not peft else 0
    for buffer in model.buffers() if not peft else ():
        if buffer.data_ptr() not in seen and buffer.is_floating_point():
            weights += buffer.numel() * buffer.element_size()
    return weights + (0 if trainer.args.save_only_model else 2 * trained)


def hints(result: PreflightResult, args) -> list[str]:
    """What to change when the step had no signal, most specific first: the measurements point at the fix (cut
    completions: a longer completion; prompts without a format instruction: one; a model that never answers: a
    system prompt or another model; one answer per group: more exploration)."""
    if result.verdict.has_signal:
        return []
    out = []
    cause = result.verdict.cause
    if cause == "no_answer":
        if result.clipped_share is not None and result.clipped_share >= 0.5:
            out.append(f"{result.clipped_share:.0%} of completions were cut at max_completion_length="
                       f"{result.max_completion_length} tokens before they could answer: raise "
                       f"--max_completion_length (e.g. {2 * result.max_completion_length}) or ask for shorter answers")
        if "\\boxed" not in str(result.messages):
            out.append("the prompt never asks for the \\boxed{} answer format: add a format instruction (the task "
                       "file's `answer_instruction`, which names its labels, or --prompt_suffix 'End your response "
                       "with your answer in \\boxed{}.')")
        out.append("the model does not write \\boxed{...} even so: add a system prompt that asks for it (the task "
                   "file's `system_prompt`), or try another (larger, instruction-tuned) --model_name_or_path")
    elif cause == "one_answer":
        out.append(f"every group agreed: raise --temperature (now {args.temperature}) or --num_generations (now "
                   f"{args.num_generations}), or use harder prompts")
    elif cause in ("equal_rewards", "verifier_abstained") and result.verdict.multi_answer_share:
        groups = len(result.answers)
        out.append(f"{result.verdict.multi_answer_share:.0%} of these {groups} groups held 2+ answers, so a longer "
                   "run may still meet a group the verifier decides: with few rows this can be chance; rerun with "
                   f"--check_rows {2 * groups} before changing the setup")
    return out
