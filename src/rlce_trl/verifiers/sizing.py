"""How big the co-located verifier server must be: its context length, its batch of sequences and its multimodal
limits, from the training settings (`verifier_mode="colocate"`; also `tools/memory_plan.py`).

vLLM sizes a server from its command line. Without `--max-model-len` it takes the checkpoint's context (Qwen3.5:
262,144 tokens) and refuses to start unless one request of that length fits the KV cache of its memory share; without
`--max-num-seqs` it warms its sampler up for 1,024 sequences (on a large GPU) over the whole vocabulary; and a
vision-language checkpoint reserves encoder memory for images and videos a text recipe never sends. The defaults
below are what the verifier's requests can need.
"""

from __future__ import annotations

import json
import math
import os

#: Tokens of everything in a verifier request that is neither the sample's context nor a candidate answer nor the
#: reply: system message, instruction, numbered pairs, chat template (`evidence/prompts.py` is well under this).
TEMPLATE_TOKENS = 512
#: Tokens a candidate answer may take beyond the policy's completion limit (re-tokenised text, the cut marker).
ANSWER_SLACK_TOKENS = 8


def verifier_max_model_length(args, max_prompt_length: int | None = None) -> int | None:
    """The verifier server's `--max-model-len`: `verifier_max_model_length` when set, else the longest request the
    verifier can receive: the context (the recipe's prompt filter `max_prompt_length`, a script argument, when known,
    else what the policy's engine allows a prompt: `vllm_max_model_length` minus `max_completion_length`), every
    candidate answer of a group (equivalence judging lists them all; construction shows two), the template and the
    longest reply. `None` when the prompt length is unknown (vLLM then takes the checkpoint's context)."""
    if getattr(args, "verifier_max_model_length", None):
        return int(args.verifier_max_model_length)
    if max_prompt_length:
        prompt = int(max_prompt_length)
    elif getattr(args, "vllm_max_model_length", None):
        prompt = max(int(args.vllm_max_model_length) - int(args.max_completion_length or 0), 1)
    else:
        return None
    answers = max(int(args.num_generations or 2), 2) * (int(args.max_completion_length or 0) + ANSWER_SLACK_TOKENS)
    reply = max(args.rlce_construction_max_tokens, args.rlce_equivalence_max_tokens, args.rlce_validation_max_tokens)
    return prompt + answers + TEMPLATE_TOKENS + reply


def verifier_max_num_seqs(args, world_size: int | None = None) -> int:
    """The verifier server's `--max-num-seqs`: the sequences one stage of one step can put in flight on this rank's
    server (its groups x ordered answer pairs x tests per direction), at most what the client keeps in flight
    (`verifier_max_concurrency` requests of that many samples)."""
    world_size = world_size or int(os.environ.get("WORLD_SIZE", "1"))
    G = max(int(args.num_generations or 2), 2)
    completions = int(args.generation_batch_size or args.per_device_train_batch_size * world_size)
    groups = max(math.ceil(completions / (G * world_size)), 1)
    samples = max(args.rlce_tests_per_direction, args.rlce_tie_break_tests_per_direction, 1)
    stage = groups * G * (G - 1) * samples
    return max(min(stage, args.verifier_max_concurrency * samples), 1)


def dataset_sends_media(dataset) -> bool:
    """Whether the verifier may be sent clips for this training set: its first row has a video (datasets whose rows
    cannot be read up front count as multimodal)."""
    from ..data.media import first_prompt, has_video

    prompt = first_prompt(dataset)
    return prompt is None or has_video(prompt)


#: vLLM arguments of a verifier that is never sent images or videos: no encoder memory is reserved for them.
TEXT_ONLY_ARGS = ("--limit-mm-per-prompt", json.dumps({"image": 0, "video": 0}))
