"""Build verifiers from an [`RLCEGRPOConfig`]: the server and co-located ones, and a frozen checkpoint loaded in this
process. The trainer's choice among them (and the reuse of its own reference or PEFT base model) is
[`~rlce_trl.verifiers.factory.VerifierFactory`]."""

from __future__ import annotations

import os
import shlex

from .base import Verifier


def frozen_verifier(path: str, *, vision_language: bool = False, device=None, dtype=None,
                    batch_size: int = 16, processor=None, **load_kwargs) -> Verifier:
    """A frozen checkpoint as a transformers verifier: a vision-language model that sees the requests' clips when
    `vision_language`, else a text model (the verifier's own checkpoint, a co-evolution partner, the frozen models
    of a co-evolution data build). `processor`: read with this tokenizer or processor instead of the checkpoint's.
    `load_kwargs` reach `from_pretrained` (`trust_remote_code`, `revision`, ...; see
    [`~rlce_trl.verifiers.factory.checkpoint_kwargs`])."""
    if vision_language:
        from ..generation.hf import load_frozen_vlm as load
        from .vlm_backend import VisionLanguageVerifier as backend
    else:
        from ..generation.hf import load_frozen_model as load
        from .transformers_backend import TransformersVerifier as backend
    model, reader = load(path, device, dtype, **load_kwargs)
    return backend(model, reader if processor is None else processor, batch_size)


def client_settings(args) -> dict:
    """The HTTP client settings (`verifier_*`) every server client is built with: the verifier's and the partner's."""
    return dict(
        max_concurrency=args.verifier_max_concurrency,
        timeout_s=args.verifier_timeout,
        request_deadline_s=args.verifier_request_deadline,
        max_reply_bytes=args.verifier_max_reply_bytes,
        max_retries=args.verifier_max_retries,
        max_consecutive_failures=args.verifier_max_consecutive_failures,
        max_outage_s=args.verifier_max_outage,
    )


def vllm_checkpoint_args(load_kwargs: dict) -> list[str]:
    """The vLLM server arguments for the `from_pretrained` keyword arguments that decide which model and code load
    (`trust_remote_code`, `revision`; the tokenizer's revision follows the model's)."""
    args = ["--trust-remote-code"] if load_kwargs.get("trust_remote_code") else []
    if load_kwargs.get("revision"):
        args += ["--revision", str(load_kwargs["revision"]), "--tokenizer-revision", str(load_kwargs["revision"])]
    return args


def remote_verifier(args, model_source: str, *, multimodal: bool = True, load_kwargs: dict | None = None) -> Verifier:
    """`verifier_mode="server"`: a client of the URLs in `args`. `verifier_mode="colocate"`: a vLLM server process
    on this rank's GPU serving `model_source` (the initial checkpoint), and its client. Every process builds its
    own: with the trainer's group ownership each process sends only the groups it scores. The server is sized for
    its requests (`sizing`: context length, sequences per stage); `multimodal=False` (a text recipe) turns its image
    and video inputs off; `load_kwargs` (`trust_remote_code`, `revision`) reach its model load. `verifier_vllm_args`
    come last and win."""
    client = client_settings(args)
    if args.verifier_mode == "server":
        from .server import ServerVerifier

        return ServerVerifier(args.verifier_server_base_url, model=args.verifier_server_model, **client)
    if args.verifier_mode == "colocate":
        from .colocate import ColocatedVLLMVerifier, device_for_local_rank
        from .sizing import TEXT_ONLY_ARGS, verifier_max_model_length, verifier_max_num_seqs
        from .vllm_process import VLLMServerProcess

        process = VLLMServerProcess(
            model_source,
            python=args.verifier_vllm_python,
            gpu_memory_utilization=args.verifier_gpu_memory_utilization,
            devices=device_for_local_rank(int(os.environ.get("LOCAL_RANK", "0"))),
            tensor_parallel_size=args.verifier_tensor_parallel_size,
            max_model_len=verifier_max_model_length(args),
            max_num_seqs=verifier_max_num_seqs(args),
            enable_sleep_mode=args.verifier_enable_sleep_mode,
            extra_args=[*vllm_checkpoint_args(load_kwargs or {}), *([] if multimodal else TEXT_ONLY_ARGS),
                        *shlex.split(args.verifier_vllm_args)],
            startup_timeout_s=args.verifier_startup_timeout,
        )
        return ColocatedVLLMVerifier(process, sleep_between_calls=args.verifier_enable_sleep_mode, **client)
    raise ValueError(f"verifier_mode={args.verifier_mode!r} is built in process (verifiers.factory), not here.")


def described_verifier(description: str, options) -> Verifier:
    """The verifier a description names, built in the calling process (the reward object [`~rlce_trl.RLCEReward`]
    builds it where TRL calls it: the trainer's process, or the asynchronous trainer's rollout child): one or several
    server URLs, a [`ServerVerifier`] with the `verifier_*` client settings of `options`; else a model folder or Hub
    id, a frozen transformers copy on this process's GPU (`LOCAL_RANK`) when one is visible, else on the CPU.
    `options`: an object with the `verifier_*` fields (an `RLCEGRPOConfig`, or a namespace of them); `None`: each
    backend's defaults."""
    if description.strip().lower().startswith(("http://", "https://")):
        from .server import ServerVerifier

        if options is None:  # the client's own defaults
            return ServerVerifier(description)
        return ServerVerifier(description, model=options.verifier_server_model, **client_settings(options))
    import torch

    device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}" if torch.cuda.is_available() else "cpu"
    return frozen_verifier(description, device=device, **({} if options is None else {
        "batch_size": options.verifier_batch_size}))
