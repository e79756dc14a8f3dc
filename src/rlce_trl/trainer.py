"""RLCEGRPOTrainer: TRL's GRPOTrainer with the comparative-evidence reward."""

from __future__ import annotations

import copy
import json
import logging
import os
import textwrap

import torch
from accelerate.utils import gather_object
from trl import GRPOTrainer

from .config import RLCEGRPOConfig
from .baselines import build_scorer
from .evidence.pipeline import StepStats
from .rewards import build_groups, completion_text, group_log_columns, rlce_format
from .verifiers.base import Verifier, VerifierUnavailableError
from .verifiers.from_config import remote_verifier
from .verifiers.transformers_backend import TransformersVerifier, load_frozen_model

logger = logging.getLogger(__name__)

SCORER_STATE_FILE = "rlce_scorer_state.json"


class _GroupReward:
    """TRL's view of the group reward: a reward function that hands out this process's slice of the rewards that
    `RLCEGRPOTrainer._calculate_rewards` computed for whole groups. Its name is what TRL logs (`rewards/<name>/mean`)."""

    def __init__(self, trainer: RLCEGRPOTrainer, name: str):
        self.__name__ = name
        self._trainer = trainer

    def __call__(self, prompts, completions, **kwargs) -> list[float | None]:
        rewards, self._trainer._group_rewards = self._trainer._group_rewards, None
        if rewards is None or len(rewards) != len(prompts):
            raise RuntimeError(
                f"{self.__name__} is filled by RLCEGRPOTrainer._calculate_rewards and cannot be called on its own. "
                "For a plain GRPOTrainer use rlce_trl.RLCEReward."
            )
        return rewards


class RLCEGRPOTrainer(GRPOTrainer):
    """
    Trainer for Reinforcement Learning with Comparative Evidence (RLCE): GRPO whose reward is the comparative-evidence
    verdict of a frozen copy of the initial model, with no gold labels.

    A drop-in replacement for [`~trl.GRPOTrainer`]; the arguments are the same, plus `verifier`. What differs:

    1. **Rewards.** Two reward functions come first: `rlce_verified` (Eq. 5: 1 for rollouts whose answer is the
       verified answer, 0 otherwise, `None` for the whole group when there is no verified answer) and `rlce_format`
       (1 when the response ends in `\\boxed{}`), weighted by `args.rlce_verified_weight` / `args.rlce_format_weight`.
       With `args.reward_method` set to a baseline (`usc`, `rler`, ...) its group reward replaces `rlce_verified`.
       `reward_funcs` you pass are optional and come after them; `args.reward_weights`, if set, weights those only.
       TRL's weighting, None handling and `rewards/<name>/mean` logging apply unchanged.
    2. **Whole groups.** `_calculate_rewards` gathers prompts and completions from all processes, cuts them into
       groups of G in sampler order, scores group g on process `g % num_processes` (each group exactly once, with all
       its members), gathers the results and gives each process its own slice.
    3. **Frozen verifier.** `verifier`, or one built from `args`: the model `args.verifier_model_name_or_path`, else
       the initial checkpoint: the PEFT base model with the adapter disabled, the reference model (`beta > 0`), or a
       separate frozen copy loaded once per process. Never the policy's generation engine, which receives the
       trained weights.
    4. **Logging.** `rlce/*` metrics per step (distinct answers per group, tests built and validated, verdict
       fractions, tie rates, fraction of groups with a verified answer, verifier calls, tokens and seconds) and
       `rlce_*` columns in the completions table.
    5. **State across steps** (the static tests of `rlce_mode="static"`) is shared across processes and saved with
       every checkpoint (`rlce_scorer_state.json`), so a resumed run reuses it.
    """

    _tag_names = ["trl", "grpo", "rlce"]
    _name = "RLCE-GRPO"
    _paper = {
        "title": "Reinforcement Learning with Comparative Evidence for Social Intelligence",
        "id": None,
        # docstyle-ignore
        "citation": textwrap.dedent("""\
            @article{rlce2026,
                title        = {{Reinforcement Learning with Comparative Evidence for Social Intelligence}},
                year         = 2026,
            }"""),
    }

    def __init__(
        self,
        model,
        reward_funcs=None,
        args: RLCEGRPOConfig | None = None,
        train_dataset=None,
        eval_dataset=None,
        processing_class=None,
        reward_processing_classes=None,
        callbacks=None,
        optimizers=(None, None),
        peft_config=None,
        verifier: Verifier | None = None,
        **kwargs,
    ):
        if args is None:
            name = model if isinstance(model, str) else model.config._name_or_path
            args = RLCEGRPOConfig(f"{str(name).split('/')[-1] or 'model'}-RLCE")
        elif not isinstance(args, RLCEGRPOConfig):
            raise TypeError(
                f"RLCEGRPOTrainer needs an RLCEGRPOConfig, got {type(args).__name__}: build the same arguments with "
                "`RLCEGRPOConfig(...)` (it accepts every GRPOConfig field)."
            )
        user_funcs = [] if reward_funcs is None else list(reward_funcs) if isinstance(reward_funcs, list) else [reward_funcs]
        user_weights = args.reward_weights
        if user_weights is not None and len(user_weights) != len(user_funcs):
            raise ValueError(
                f"reward_weights has {len(user_weights)} entries but {len(user_funcs)} reward_funcs were passed: in "
                "RLCEGRPOTrainer, reward_weights weights your own reward_funcs only; the RLCE rewards are weighted by "
                "rlce_verified_weight and rlce_format_weight."
            )
        if reward_processing_classes is not None:  # they belong to your reward_funcs, after the two RLCE ones
            if not isinstance(reward_processing_classes, list):
                reward_processing_classes = [reward_processing_classes]
            reward_processing_classes = [None, None, *reward_processing_classes]

        # Server and co-located verifiers come first: a server that is down fails the run before any model loads,
        # and a co-located vLLM server profiles GPU memory before TRL's own engine takes its share.
        if verifier is None and args.verifier_mode != "transformers":
            source = args.verifier_model_name_or_path or (model if isinstance(model, str) else model.config._name_or_path)
            verifier = remote_verifier(args, source, int(os.environ.get("LOCAL_RANK", "0")))

        # A model given in memory without a checkpoint on disk or the Hub: keep an untouched copy as verifier.
        self._initial_model = None
        if verifier is None and not isinstance(model, str) and args.verifier_model_name_or_path is None:
            if not getattr(model.config, "_name_or_path", "") and peft_config is None:
                self._initial_model = copy.deepcopy(model)

        self._group_rewards: list[float | None] | None = None
        #: Prefix of the per-step metrics and name of the group reward: `rlce` for RLCE and its ablations, else the
        #: baseline's name.
        self.method_name = "rlce" if args.reward_method.startswith("rlce") else args.reward_method
        group_reward = _GroupReward(self, "rlce_verified" if self.method_name == "rlce" else self.method_name)
        args.reward_weights = None  # TRL checks the length against all reward functions; set below
        try:
            super().__init__(
                model=model,
                reward_funcs=[group_reward, rlce_format, *user_funcs],
                args=args,
                train_dataset=train_dataset,
                eval_dataset=eval_dataset,
                processing_class=processing_class,
                reward_processing_classes=reward_processing_classes,
                callbacks=callbacks,
                optimizers=optimizers,
                peft_config=peft_config,
                **kwargs,
            )
        finally:
            args.reward_weights = user_weights
        weights = [args.rlce_verified_weight, args.rlce_format_weight, *(user_weights or [1.0] * len(user_funcs))]
        self.reward_weights[: len(weights)] = torch.tensor(weights, dtype=torch.float32)

        self.verifier = verifier if verifier is not None else self._build_verifier(model)
        if args.rlce_verdict_calibration_file:  # opt-in, label-light: verdicts read through a fitted calibration
            from .calibration.scoring import CalibratedVerifier, VerdictCalibration

            calibration = VerdictCalibration.load(args.rlce_verdict_calibration_file)
            self.verifier = CalibratedVerifier(self.verifier, calibration)
        self._initial_model = None
        #: Scores whole rollout groups: `score(groups) -> (results, stats)`. The RLCE evidence pipeline by default.
        self.group_scorer = build_scorer(args.reward_method, self.verifier, args.evidence_settings())

    # -- the verifier -------------------------------------------------------------------------------------------------
    def _build_verifier(self, model_arg) -> Verifier:
        args = self.args
        device = self.accelerator.device
        sharded = self.is_fsdp_enabled or (
            self.is_deepspeed_enabled and self.accelerator.state.deepspeed_plugin.zero_stage == 3
        )
        if args.verifier_model_name_or_path is not None:
            source = args.verifier_model_name_or_path
        else:
            policy = self.accelerator.unwrap_model(self.model)
            if hasattr(policy, "disable_adapter") and hasattr(policy, "peft_config") and not sharded:
                logger.info("RLCE verifier: the PEFT base model with the adapter disabled.")
                return TransformersVerifier(policy, self._tokenizer, args.verifier_batch_size, policy.disable_adapter)
            if self.ref_model is not None and not sharded:
                logger.info("RLCE verifier: the trainer's frozen reference model.")
                ref = self.accelerator.unwrap_model(self.ref_model)
                return TransformersVerifier(ref, self._tokenizer, args.verifier_batch_size, torch.no_grad)
            if self._initial_model is not None:
                logger.info("RLCE verifier: a frozen in-memory copy of the initial model.")
                return TransformersVerifier(self._initial_model.to(device), self._tokenizer, args.verifier_batch_size)
            source = model_arg if isinstance(model_arg, str) else policy.config._name_or_path
        logger.info("RLCE verifier: frozen copy of %s loaded on %s.", source, device)
        dtype = (args.model_init_kwargs or {}).get("dtype", "auto")
        model, tokenizer = load_frozen_model(source, device=device, dtype=dtype)
        return TransformersVerifier(model, tokenizer, args.verifier_batch_size)

    # -- rewards --------------------------------------------------------------------------------------------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        mode = "train" if self.model.training else "eval"
        num_generations = self.num_generations if mode == "train" else self.num_generations_eval
        rank, world = self.accelerator.process_index, self.accelerator.num_processes
        labels_column = self.args.rlce_labels_column

        # 1. Whole groups: every process sees the whole generation batch, in sampler order.
        local = [
            (p, completion_text(c), ex.get(labels_column), ex.get("question"))
            for p, c, ex in zip(prompts, completions, inputs)
        ]
        batch = gather_object(local)
        rows, texts, labels, questions = (list(column) for column in zip(*batch))
        groups = build_groups(rows, texts, labels, num_generations, questions)

        # 2. Each group scored once, by process g % world.
        owned = list(range(rank, len(groups), world))
        before = self.verifier.stats.snapshot()
        try:
            results, stats = self.group_scorer.score([groups[g] for g in owned])
            failure = None
        except VerifierUnavailableError as error:  # raised below on every rank, or the others hang in the gather
            results, stats, failure = [], StepStats(), f"process {rank}: {error}"
        work = self.verifier.stats.since(before)
        packed = [(g, r.verified, group_log_columns(r)) for g, r in zip(owned, results)]
        updates = self.group_scorer.pop_state_updates() if hasattr(self.group_scorer, "pop_state_updates") else []
        everyone = gather_object([(rank, packed, stats, work, updates, failure)])
        failures = [e[5] for e in everyone if e[5]]
        if failures:
            raise VerifierUnavailableError(
                "The verifier failed persistently, so no rewards can be computed:\n" + "\n".join(failures)
                + "\nCheck the verifier server (its URL, its log), or raise verifier_max_consecutive_failures."
            )

        # 3. Back in group order; this process keeps its slice.
        by_group = {g: (verified, columns) for _, items, *_ in everyone for g, verified, columns in items}
        verified = [r for g in range(len(groups)) for r in by_group[g][0]]
        start = rank * len(prompts)
        self._group_rewards = verified[start : start + len(prompts)]
        columns: dict[str, list] = {}
        for g in range(len(groups)):
            for name, values in by_group[g][1].items():
                columns.setdefault(name, []).extend(values)
        for name, values in columns.items():
            self._log_completion_extra(name, values[start : start + len(prompts)])

        self._log_rlce_metrics(mode, [e[2] for e in everyone], [e[3] for e in everyone])
        # State built across steps (static tests, rubric buffers) follows the prompt, whichever process scored it.
        for other_rank, _, _, _, other_updates, _ in everyone:
            if other_rank != rank and other_updates:
                self.group_scorer.apply_state_updates(other_updates)
        return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

    def _log_rlce_metrics(self, mode: str, per_rank: list[StepStats], work) -> None:
        total = StepStats.merge(per_rank)
        metrics, prefix = self._metrics[mode], self.method_name
        for name, value in total.metrics().items():
            metrics[f"{prefix}/{name}"].append(value)
        for reason, count in sorted((total.verdict_failures + total.construction_failures).items()):
            metrics[f"{prefix}/parse_failures/{reason}"].append(float(count))
        metrics[f"{prefix}/verifier_seconds"].append(max(w.seconds for w in work))  # ranks work in parallel
        metrics[f"{prefix}/verifier_calls"].append(float(sum(w.calls for w in work)))
        metrics[f"{prefix}/verifier_generated_tokens"].append(float(sum(w.generated_tokens for w in work)))
        metrics[f"{prefix}/verifier_failed_requests"].append(float(sum(w.failed_requests for w in work)))
        transport = getattr(self.verifier, "server_stats", None)  # server and colocate modes: cumulative counters
        if transport is not None:
            metrics[f"{prefix}/verifier_retries_total"].append(float(transport.retries))
            metrics[f"{prefix}/verifier_timeouts_total"].append(float(transport.timeouts))
        if hasattr(self.verifier, "restarts"):
            metrics[f"{prefix}/verifier_restarts_total"].append(float(self.verifier.restarts))
        if total.static_cache_hits:
            metrics[f"{prefix}/static_cache_hits"].append(float(total.static_cache_hits))
        failures = total.verdict_failures
        if failures:
            logger.info("%s: %d unreadable verdicts counted as abstentions (%s).", prefix, sum(failures.values()),
                        ", ".join(f"{k}={v}" for k, v in sorted(failures.items())))

    # -- model card ---------------------------------------------------------------------------------------------------
    #: Dataset and recipe names for the model card; the example scripts fill it (`{"dataset": ..., "recipe": ...}`).
    rlce_card_info: dict | None = None

    def create_model_card(self, model_name=None, dataset_name=None, tags=None):
        """TRL's card, plus the RLCE section (method and paper, verifier model and mode, reward settings, dataset,
        recipe), with anything that looks like a credential left out."""
        super().create_model_card(model_name=model_name, dataset_name=dataset_name, tags=tags)
        if self.is_world_process_zero():
            from .model_card import add_rlce_section

            add_rlce_section(self, os.path.join(self.args.output_dir, "README.md"), dataset_name)

    def train(self, *args, **kwargs):
        """[`~trl.GRPOTrainer.train`]; on an error the verifier (a server process the trainer started) is stopped
        before the error propagates, so nothing is left running."""
        try:
            return super().train(*args, **kwargs)
        except BaseException:
            self.verifier.close()
            raise

    # -- scorer state across checkpoints ---------------------------------------------------------------------------
    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        state = self.group_scorer.state_dict() if hasattr(self.group_scorer, "state_dict") else {}
        if self.args.should_save and any(state.values()):
            folder = os.path.join(self._get_output_dir(trial=trial), f"checkpoint-{self.state.global_step}")
            with open(os.path.join(folder, SCORER_STATE_FILE), "w") as f:
                json.dump(state, f)

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        path = os.path.join(checkpoint, SCORER_STATE_FILE) if checkpoint else None
        if path and os.path.exists(path):
            with open(path) as f:
                self.group_scorer.load_state_dict(json.load(f))
            logger.info("RLCE: scorer state (static tests, rubrics) restored from %s.", path)
