"""The verifier and the partner of an [`RLCEGRPOTrainer`], built in one place from its arguments.

[`VerifierFactory`] works in two stages because TRL's `GRPOTrainer.__init__` loads the policy between them:

1. `VerifierFactory(args, model, verifier, ...)`, before the policy loads: the `verifier=` you passed (or, with your
   own `group_scorer=` and no `verifier=`, a verifier that refuses every call), the server and co-located verifiers
   (`verifier_mode="server"` / `"colocate"`), the partner's server client (`partner_mode="server"`), and an untouched
   copy of a model given in memory without a checkpoint. A server that is down fails the run before any model loads,
   and a co-located vLLM server profiles GPU memory before TRL's own engine takes its share.
2. `factory.build(trainer)`, once the trainer holds its policy: the in-process verifier (`verifier_mode=
   "transformers"`: the named verifier model, else the initial model: the PEFT base model with the adapter disabled,
   the reference model when `beta > 0` (not with `sync_ref_model`, which moves it), the in-memory copy, or a frozen
   copy of the initial checkpoint loaded once per process; a vision-language policy's verifier sees the clips), the
   [`CalibratedVerifier`] wrapper (`rlce_verdict_calibration_file`) and the frozen partner
   (`partner_model_name_or_path`). The verifier is never the policy's generation engine, which receives the trained
   weights, nor a model that TRL writes into. Every checkpoint loaded here is loaded as TRL loads the policy
   ([`checkpoint_kwargs`]).
"""

from __future__ import annotations

import copy
import logging

import torch

from .base import Reply, Verifier
from .from_config import frozen_verifier, remote_verifier
from .partner import server_partner

logger = logging.getLogger(__name__)

#: `model_init_kwargs` entries about placement, not about which model loads: the verifier keeps its own.
PLACEMENT_KWARGS = ("dtype", "torch_dtype", "device_map")
#: Entries that name a place inside the policy's own repository: they reach loads of the policy's checkpoint only,
#: not a separately named verifier or partner checkpoint.
POLICY_REPO_KWARGS = ("revision", "subfolder")


def checkpoint_kwargs(args, *, policy_checkpoint: bool, quantization_config=None) -> dict:
    """The `from_pretrained` keyword arguments of a frozen checkpoint the trainer loads, as TRL loads the policy and
    its reference model: `args.model_init_kwargs` (what decides which weights and code load) but [`PLACEMENT_KWARGS`]
    and, unless `policy_checkpoint`, [`POLICY_REPO_KWARGS`]; `trust_remote_code` defaulting to
    `args.trust_remote_code`, and the trainer's `quantization_config` argument."""
    kwargs = {k: v for k, v in (args.model_init_kwargs or {}).items() if k not in PLACEMENT_KWARGS}
    kwargs.setdefault("trust_remote_code", args.trust_remote_code)
    if quantization_config is not None:
        kwargs.setdefault("quantization_config", quantization_config)
    if not policy_checkpoint:
        kwargs = {k: v for k, v in kwargs.items() if k not in POLICY_REPO_KWARGS}
    return kwargs


class NoVerifier(Verifier):
    """Stands in when a `group_scorer` is passed without a `verifier`: the trainer loads no model for it."""

    name = "none"

    def _generate(self, requests) -> list[Reply]:
        raise RuntimeError("This trainer has no verifier: pass `verifier=` with your `group_scorer`.")


class VerifierFactory:
    """Builds the trainer's verifier and partner (see the module docstring for the two stages).

    Args:
        args: the trainer's [`RLCEGRPOConfig`].
        model: the trainer's `model` argument (a name or path, or a model in memory).
        verifier: a verifier you built yourself; used as it is (wrapped by the calibration when one is set).
        peft_config: the trainer's `peft_config` (a PEFT policy's verifier is its base model, no copy is made).
        own_scorer: a `group_scorer` was passed: no verifier is built for it (pass `verifier=` when it uses one).
        multimodal: whether a server verifier may be sent clips (`verifiers.sizing.dataset_sends_media`); a text-only
            one is started with image and video inputs off.
        quantization_config: the trainer's `quantization_config` argument (the policy's), for the frozen copies.
    """

    def __init__(self, args, model, verifier: Verifier | None = None, *, peft_config=None, own_scorer: bool = False,
                 multimodal: bool = True, quantization_config=None):
        self.args, self.model = args, model
        self.quantization_config = quantization_config
        if own_scorer and verifier is None:
            verifier = NoVerifier()
        if verifier is None and args.verifier_mode != "transformers":
            initial = model if isinstance(model, str) else model.config._name_or_path
            source = args.verifier_model_name_or_path or initial
            load = checkpoint_kwargs(args, policy_checkpoint=source == initial,
                                     quantization_config=quantization_config)
            verifier = remote_verifier(args, source, multimodal=multimodal, load_kwargs=load)
        self.verifier = verifier
        self.partner: Verifier | None = server_partner(args) if args.partner_mode == "server" else None
        # A model given in memory without a checkpoint on disk or the Hub: keep an untouched copy as verifier.
        self.initial_model = None
        if (verifier is None and not isinstance(model, str) and args.verifier_model_name_or_path is None
                and peft_config is None and not getattr(model.config, "_name_or_path", "")):
            self.initial_model = copy.deepcopy(model)

    def build(self, trainer) -> tuple[Verifier, Verifier | None]:
        """The trainer's `(verifier, partner)`, once `GRPOTrainer.__init__` has loaded the policy."""
        args = self.args
        verifier = self.verifier if self.verifier is not None else in_process_verifier(
            trainer, self.model, self.initial_model, self.quantization_config)
        self.initial_model = None
        if args.rlce_verdict_calibration_file:  # opt-in, label-light: verdicts read through a fitted calibration
            from .calibrated import CalibratedVerifier, VerdictCalibration

            verifier = CalibratedVerifier(verifier, VerdictCalibration.load(args.rlce_verdict_calibration_file))
        partner = self.partner
        if partner is None and args.partner_model_name_or_path is not None:  # loaded once, like the verifier
            partner = _frozen_checkpoint(trainer, args.partner_model_name_or_path, self.model,
                                         self.quantization_config)
        return verifier, partner


def _policy_source(trainer, model_arg) -> str:
    """The checkpoint the policy was loaded from (the trainer's `model` argument, or the model's own name)."""
    if isinstance(model_arg, str):
        return model_arg
    return trainer.accelerator.unwrap_model(trainer.model).config._name_or_path


def _frozen_checkpoint(trainer, path: str, model_arg, quantization_config, processor=None) -> Verifier:
    """The checkpoint `path` as a frozen verifier of the trainer's kind (text or vision-language), loaded with
    [`checkpoint_kwargs`]; a vision-language one reads with `processor` when given."""
    args = trainer.args
    load = checkpoint_kwargs(args, policy_checkpoint=path == _policy_source(trainer, model_arg),
                             quantization_config=quantization_config)
    return frozen_verifier(path, vision_language=trainer._is_vlm, device=trainer.accelerator.device,
                           dtype=(args.model_init_kwargs or {}).get("dtype", "auto"),
                           batch_size=args.verifier_batch_size, processor=processor, **load)


def in_process_verifier(trainer, model_arg, initial_model=None, quantization_config=None) -> Verifier:
    """`verifier_mode="transformers"`, in the order of the module docstring. What the trainer already holds (the
    PEFT base model, the reference model) is reused only where it scores on its own: not under FSDP or ZeRO-3 (a
    shard cannot), and not the reference model with `sync_ref_model=True` (TRL's `SyncRefModelCallback` mixes the
    policy into it every `ref_model_sync_steps`). A vision-language policy's verifier reads with its processor."""
    args, device, size = trainer.args, trainer.accelerator.device, trainer.args.verifier_batch_size
    vlm = trainer._is_vlm
    what = "vision-language model" if vlm else "model"
    source = _policy_source(trainer, model_arg)
    if args.verifier_model_name_or_path is not None:
        logger.info("RLCE verifier: frozen %s %s.", what, args.verifier_model_name_or_path)
        return _frozen_checkpoint(trainer, args.verifier_model_name_or_path, model_arg, quantization_config)
    if vlm:
        from .vlm_backend import VisionLanguageVerifier as backend

        reader = trainer.processing_class
    else:
        from .transformers_backend import TransformersVerifier as backend

        reader = trainer._tokenizer
    sharded = trainer.is_fsdp_enabled or (
        trainer.is_deepspeed_enabled and trainer.accelerator.state.deepspeed_plugin.zero_stage == 3
    )
    policy = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(policy, "disable_adapter") and hasattr(policy, "peft_config") and not sharded:
        logger.info("RLCE verifier: the PEFT base %s with the adapter disabled.", what)
        return backend(policy, reader, size, policy.disable_adapter)
    if trainer.ref_model is not None and not sharded and not args.sync_ref_model:
        logger.info("RLCE verifier: the trainer's frozen reference %s.", what)
        return backend(trainer.accelerator.unwrap_model(trainer.ref_model), reader, size, torch.no_grad)
    if initial_model is not None:
        logger.info("RLCE verifier: a frozen in-memory copy of the initial %s.", what)
        return backend(initial_model.to(device), reader, size)
    logger.info("RLCE verifier: frozen copy of %s (%s) loaded on %s.", source, what, device)
    # a vision-language copy reads with the policy's own processor
    return _frozen_checkpoint(trainer, source, model_arg, quantization_config, processor=reader if vlm else None)
