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

from .audit import EVIDENCE_FILE, EvidenceRecorder
from .config import RLCEGRPOConfig
from .data.checks import check_datasets
from .methods import build_scorer, method_hook, scorer_name
from .rewards import build_groups, completion_text, group_log_columns, rlce_format
from .scoring import GroupScorer, StepStats, as_group_scorer
from .verifiers.base import Reply, Verifier, VerifierUnavailableError
from .verifiers.from_config import frozen_verifier, remote_verifier
from .verifiers.partner import server_partner
from .verifiers.transformers_backend import TransformersVerifier
from .video.trainer import VideoGRPOMixin

logger = logging.getLogger(__name__)

SCORER_STATE_FILE = "rlce_scorer_state.json"


class _NoVerifier(Verifier):
    """Stands in when a `group_scorer` is passed without a `verifier`: the trainer loads no model for it."""

    name = "none"

    def _generate(self, requests) -> list[Reply]:
        raise RuntimeError("This trainer has no verifier: pass `verifier=` with your `group_scorer`.")


class _GroupReward:
    """TRL's view of the group reward: a reward function that hands out this process's slice of the rewards that
    `RLCEGRPOTrainer._calculate_rewards` computed for whole groups. Its name is what TRL logs
    (`rewards/<name>/mean`)."""

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


class RLCEGRPOTrainer(VideoGRPOMixin, GRPOTrainer):
    """
    Trainer for Reinforcement Learning with Comparative Evidence (RLCE): GRPO whose reward is the comparative-evidence
    verdict of a frozen copy of the initial model, with no gold labels.

    A drop-in replacement for [`~trl.GRPOTrainer`]; the arguments are the same, plus `verifier`. What differs:

    1. **Rewards.** Two reward functions come first: `rlce_verified` (Eq. 5: 1 for rollouts whose answer is the
       verified answer, 0 otherwise, `None` for the whole group when there is no verified answer) and `rlce_format`
       (1 when the response ends in `\\boxed{}`), weighted by `args.rlce_verified_weight` / `args.rlce_format_weight`.
       With `args.reward_method` set to a baseline (`usc`, `rler`, ...) or to your own scorer
       (`"package.module:Class"`), or with `group_scorer=` (any [`~rlce_trl.scoring.GroupScorer`]), its group reward
       replaces `rlce_verified`; `args.reward_method_kwargs` reach the scorer's constructor.
       `reward_funcs` you pass are optional and come after them; `args.reward_weights`, if set, weights those only.
       TRL's weighting, None handling and `rewards/<name>/mean` logging apply unchanged.
    2. **Whole groups.** `_calculate_rewards` gathers prompts and completions from all processes, cuts them into
       groups of G in sampler order, scores group g on process `g % num_processes` (each group exactly once, with all
       its members), gathers the results, runs the scorer's `finalize_batch` on the whole batch on every process and
       gives each process its own slice.
    3. **Frozen verifier.** `verifier`, or one built from `args`: the model `args.verifier_model_name_or_path`, else
       the initial checkpoint: the PEFT base model with the adapter disabled, the reference model (`beta > 0`), or a
       separate frozen copy loaded once per process. Never the policy's generation engine, which receives the
       trained weights.
    4. **Logging.** `rlce/*` metrics per step (distinct answers per group, tests built and validated, verdict
       fractions, tie rates, fraction of groups with a verified answer, verifier calls, tokens and seconds) and
       `rlce_*` columns in the completions table.
    5. **Video** (`args.video_input`, [`~rlce_trl.video.trainer.VideoGRPOMixin`]): a row's clip reaches generation,
       every log-probability forward and the verifier's requests; unsupported combinations raise.
    6. **State across steps** (the static tests of `rlce_mode="static"`) is shared across processes and saved with
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
        group_scorer: GroupScorer | None = None,
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
        check_datasets(train_dataset, eval_dataset, args.rlce_labels_column)  # bad rows fail here, naming row and fix
        if reward_funcs is None:
            user_funcs = []
        else:
            user_funcs = list(reward_funcs) if isinstance(reward_funcs, list) else [reward_funcs]
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

        self.check_video_dataset(train_dataset, args)  # video rows the settings cannot train: fail before loading
        # Server and co-located verifiers come first: a server that is down fails the run before any model loads,
        # and a co-located vLLM server profiles GPU memory before TRL's own engine takes its share.
        if group_scorer is not None:  # your scorer: no verifier is built for it (pass `verifier=` when it uses one)
            group_scorer = as_group_scorer(group_scorer)
            verifier = verifier if verifier is not None else _NoVerifier()
        if verifier is None and args.verifier_mode != "transformers":
            initial = model if isinstance(model, str) else model.config._name_or_path
            source = args.verifier_model_name_or_path or initial
            verifier = remote_verifier(args, source, int(os.environ.get("LOCAL_RANK", "0")))
        #: The frozen partner of a co-evolution phase (`partner_*`), passed to scorers that take `partner=`.
        self.partner: Verifier | None = server_partner(args) if args.partner_mode == "server" else None

        # A model given in memory without a checkpoint on disk or the Hub: keep an untouched copy as verifier.
        self._initial_model = None
        if verifier is None and not isinstance(model, str) and args.verifier_model_name_or_path is None:
            if not getattr(model.config, "_name_or_path", "") and peft_config is None:
                self._initial_model = copy.deepcopy(model)

        self._group_rewards: list[float | None] | None = None
        #: Prefix of the per-step metrics and name of the group reward: `rlce` for RLCE and its ablations, else the
        #: baseline's name.
        self.method_name = group_scorer.name if group_scorer is not None else scorer_name(args.reward_method)
        group_reward = _GroupReward(self, "rlce_verified" if self.method_name == "rlce" else self.method_name)
        args.reward_weights = None  # TRL checks the length against all reward functions; set below
        try:
            super().__init__(
                model=model,
                reward_funcs=[group_reward, self._format_reward(group_scorer, args.reward_method), *user_funcs],
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
        self._video_setup()
        weights = [args.rlce_verified_weight, args.rlce_format_weight, *(user_weights or [1.0] * len(user_funcs))]
        self.reward_weights[: len(weights)] = torch.tensor(weights, dtype=torch.float32)

        self.verifier = verifier if verifier is not None else self._build_verifier(model)
        if args.rlce_verdict_calibration_file:  # opt-in, label-light: verdicts read through a fitted calibration
            from .calibration.scoring import CalibratedVerifier, VerdictCalibration

            calibration = VerdictCalibration.load(args.rlce_verdict_calibration_file)
            self.verifier = CalibratedVerifier(self.verifier, calibration)
        self._initial_model = None
        if self.partner is None and args.partner_model_name_or_path is not None:  # loaded once, like the verifier
            self.partner = frozen_verifier(args.partner_model_name_or_path, vision_language=self._is_vlm,
                                           device=self.accelerator.device,
                                           dtype=(args.model_init_kwargs or {}).get("dtype", "auto"),
                                           batch_size=args.verifier_batch_size)
        #: Scores whole rollout groups (a [`~rlce_trl.scoring.GroupScorer`]). The RLCE evidence pipeline by default.
        self.group_scorer: GroupScorer = group_scorer or build_scorer(
            args.reward_method, self.verifier, args.evidence_settings(), partner=self.partner,
            **(args.reward_method_kwargs or {})
        )
        #: The evidence audit trail (`<output_dir>/rlce_evidence.jsonl`, see `rlce_trl.audit`).
        self.evidence = EvidenceRecorder(os.path.join(args.output_dir, EVIDENCE_FILE), self.method_name,
                                         args.rlce_evidence_max_mb, args.rlce_evidence,
                                         self.accelerator.is_main_process)

    # -- the verifier -------------------------------------------------------------------------------------------------
    @staticmethod
    def _format_reward(group_scorer, reward_method: str):
        """The method's own format term when its scorer defines one (`format_reward`: the rubric baselines' answer tag
        plus justification, D.3), else RLCE's `\\boxed{}` one."""
        hook = getattr(group_scorer, "format_reward", None) if group_scorer is not None else None
        return hook or method_hook(reward_method, "format_reward") or rlce_format

    def _build_verifier(self, model_arg) -> Verifier:
        args = self.args
        if self._is_vlm:  # a vision-language policy: the verifier sees the clips, with the same processor
            from .verifiers.vlm_backend import build_vlm_verifier

            return build_vlm_verifier(self, model_arg)
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
        return frozen_verifier(source, device=device, dtype=(args.model_init_kwargs or {}).get("dtype", "auto"),
                               batch_size=args.verifier_batch_size)

    # -- rewards --------------------------------------------------------------------------------------------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        mode = "train" if self.model.training else "eval"
        num_generations = self.num_generations if mode == "train" else self.num_generations_eval
        rank, world = self.accelerator.process_index, self.accelerator.num_processes
        labels_column = self.args.rlce_labels_column

        # 1. Whole groups: every process sees the whole generation batch, in sampler order.
        wanted = tuple(getattr(self.group_scorer, "columns", ()))  # dataset columns the scorer reads (Group.columns)
        local = [
            (p, completion_text(c), ex.get(labels_column), ex.get("question"), {k: ex.get(k) for k in wanted})
            for p, c, ex in zip(prompts, completions, inputs, strict=True)
        ]
        batch = gather_object(local)
        rows, texts, labels, questions, extra = (list(column) for column in zip(*batch, strict=True))
        groups = build_groups(rows, texts, labels, num_generations, questions, extra if wanted else None)

        # 2. Each group scored once, by process g % world.
        owned = list(range(rank, len(groups), world))
        before = self.verifier.stats.snapshot()
        try:
            results, stats = self.group_scorer.score([groups[g] for g in owned])
            failure = None
            if len(results) != len(owned):  # a scorer bug: raised below on every rank too
                failure = (f"process {rank}: {self.method_name} returned {len(results)} results for {len(owned)} "
                           "groups; a group scorer returns one GroupResult per group, in order.")
                results, stats = [], StepStats()
        except VerifierUnavailableError as error:  # raised below on every rank, or the others hang in the gather
            results, stats, failure = [], StepStats(), f"process {rank}: {error}"
        work = self.verifier.stats.since(before)
        packed = list(zip(owned, results, strict=True)) if failure is None else []
        updates = self.group_scorer.pop_state_updates()
        everyone = gather_object([(rank, packed, stats, work, updates, failure)])
        failures = [e[5] for e in everyone if e[5]]
        if any("a group scorer returns one GroupResult per group" in f for f in failures):
            raise RuntimeError("\n".join(failures))
        if failures:
            raise VerifierUnavailableError(
                "The verifier failed persistently, so no rewards can be computed:\n" + "\n".join(failures)
                + "\nCheck the verifier server (its URL, its log), or raise verifier_max_consecutive_failures."
            )

        # 3. Back in group order; the batch hook sees every group on every process; this process keeps its slice.
        by_group = {g: result for _, items, *_ in everyone for g, result in items}
        results = self.group_scorer.finalize_batch(groups, [by_group[g] for g in range(len(groups))])
        step = self.state.global_step + (mode == "train")  # the step these rewards are logged under
        ids = self.evidence.next_ids(mode, step, len(groups))
        verified = [r for result in results for r in result.verified]
        start = rank * len(prompts)
        self._group_rewards = verified[start : start + len(prompts)]
        columns: dict[str, list] = {}
        for gid, result in zip(ids, results, strict=True):
            for name, values in {**group_log_columns(result), "rlce_group": [gid] * len(result.verified)}.items():
                columns.setdefault(name, []).extend(values)
        for name, values in columns.items():
            self._log_completion_extra(name, values[start : start + len(prompts)])
        # The same per-completion columns reach the reward functions as kwargs (Elect's label-free gate reads
        # `rlce_verified_answer`); TRL passes every key of an input dict on.
        inputs = [{**ex, **{name: values[start + i] for name, values in columns.items()}}
                  for i, ex in enumerate(inputs)]

        self._log_rlce_metrics(mode, [e[2] for e in everyone], [e[3] for e in everyone])
        # State built across steps (static tests, rubric buffers) follows the prompt, whichever process scored it.
        for other_rank, _, _, _, other_updates, _ in everyone:
            if other_rank != rank and other_updates:
                self.group_scorer.apply_state_updates(other_updates)
        # Written once, by the main process, with every group's evidence (its state is now complete too).
        if self.accelerator.is_main_process:
            records = [self.evidence.record(group, result, gid, step, mode, self.group_scorer)
                       for group, result, gid in zip(groups, results, ids, strict=True)]
            self.evidence.write(records, self.state.global_step)
        return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

    def _log_rlce_metrics(self, mode: str, per_rank: list[StepStats], work) -> None:
        total = type(per_rank[0]).merge(per_rank) if per_rank else StepStats()
        metrics, prefix = self._metrics[mode], self.method_name
        for name, value in total.metrics().items():
            metrics[f"{prefix}/{name}"].append(value)
        for reason, count in sorted((total.verdict_failures + total.construction_failures).items()):
            metrics[f"{prefix}/parse_failures/{reason}"].append(float(count))
        metrics[f"{prefix}/verifier_seconds"].append(max(w.seconds for w in work))  # ranks work in parallel
        metrics[f"{prefix}/verifier_calls"].append(float(sum(w.calls for w in work)))
        metrics[f"{prefix}/verifier_generated_tokens"].append(float(sum(w.generated_tokens for w in work)))
        metrics[f"{prefix}/verifier_failed_requests"].append(float(sum(w.failed_requests for w in work)))
        for name, value in self.verifier.transport_metrics().items():  # server and colocate: cumulative counters
            metrics[f"{prefix}/{name}"].append(value)
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
            output = super().train(*args, **kwargs)
        except BaseException:
            self.verifier.close()
            if self.partner is not None:
                self.partner.close()
            raise
        if self.is_world_process_zero():  # the metrics `rlce-trl report` draws, also for a run without checkpoints
            os.makedirs(self.args.output_dir, exist_ok=True)
            self.state.save_to_json(os.path.join(self.args.output_dir, "trainer_state.json"))
        return output

    # -- scorer state across checkpoints ---------------------------------------------------------------------------
    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        state = self.group_scorer.state_dict()
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
