"""RLCEGRPOTrainer: TRL's GRPOTrainer with the comparative-evidence reward."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass

import torch
from accelerate.utils import gather_object
from trl import GRPOTrainer

from .audit import EVIDENCE_FILE, EvidenceRecorder
from .config import RLCEGRPOConfig
from .data.checks import check_datasets
from .data.jsonl import write_json
from .data.prompts import completion_text
from .errors import InputError, raise_if_interrupted
from .evidence.prompts import render_context
from .health import HealthMonitor, HealthThresholds, NoLearningSignalError
from .interrupted import clear_interrupted, interrupted_checkpoint, save_after_verifier_failure, save_interrupted
from .methods import build_scorer, method_hook, scorer_name
from .model_card import PAPER, add_rlce_section
from .models import resolve_model
from .retention import CompletionsRetention
from .rewards import build_groups, completion_columns, rlce_format
from .scoring import GroupResult, GroupScorer, StepStats, as_group_scorer
from .tracking import TrackioEvidence, attach_trackio, link_model_card, with_trackio_tags
from .trainer_video import VideoGRPOMixin
from .verifiers.base import Verifier, VerifierStats, VerifierUnavailableError
from .verifiers.factory import VerifierFactory
from .verifiers.sizing import dataset_sends_media

logger = logging.getLogger(__name__)

SCORER_STATE_FILE = "rlce_scorer_state.json"
GROUP_REWARD_COLUMN = "rlce_group_reward"  # read by [`_GroupReward`]
#: The package's own reward functions, always the first two (a baseline's scorer renames the group reward).
RLCE_REWARD_NAMES = ("rlce_verified", "rlce_format")


class _GroupReward:
    """TRL's view of the group reward, a reward function named `rlce_verified` (or the scorer's name) that TRL logs
    (`rewards/<name>/mean`), weights and sums like any other. `RLCEGRPOTrainer._calculate_rewards` scores whole
    groups and hands each completion's reward over as the input column `rlce_group_reward` (TRL passes every input
    column to every reward function as a keyword); this function returns that column and keeps no state."""

    def __init__(self, name: str):
        self.__name__ = name

    def __call__(self, prompts, completions, **kwargs) -> list[float | None]:
        rewards = kwargs.get(GROUP_REWARD_COLUMN)
        if rewards is None or len(rewards) != len(prompts):
            raise RuntimeError(
                f"{self.__name__} is filled by RLCEGRPOTrainer._calculate_rewards and cannot be called on its own. "
                "For a plain GRPOTrainer use rlce_trl.RLCEReward."
            )
        return list(rewards)


@dataclass
class RankReport:
    """What each process reports in the gather of `RLCEGRPOTrainer._calculate_rewards`."""

    rank: int
    #: (group index in the batch, its result) for each group this process scored.
    results: list[tuple[int, GroupResult]]
    stats: StepStats
    #: The verifier calls, tokens and seconds this process spent on them.
    work: VerifierStats
    #: The scorer's state built this step (`pop_state_updates`), applied on every other process.
    state_updates: list
    #: Why no rewards came from this process (a verifier that failed persistently, a scorer bug), else None.
    failure: str | None = None
    #: The failure is a scorer returning the wrong number of results (a RuntimeError, not a verifier outage).
    scorer_bug: bool = False


def check_environment_prompts(prompts: list, num_generations: int) -> None:
    """With TRL's `environment_factory` each rollout's `reset()` supplies (part of) its prompt. RLCE compares the G
    answers of a row to one prompt, so the G rollouts of a row must have got the same one; raise [`InputError`]
    naming the first group where they did not."""
    for start in range(0, len(prompts), num_generations):
        group = prompts[start : start + num_generations]
        other = next((p for p in group if p != group[0]), None)
        if other is not None:
            raise InputError(
                f"environment_factory: reset() gave the {num_generations} rollouts of one row different prompts "
                f"({render_context(group[0])[-80:]!r} vs {render_context(other)[-80:]!r}); RLCE compares a row's "
                "answers to one prompt: make reset() return the same observation for every rollout of a row (derive "
                "it from the row's fields, e.g. a seed column)."
            )


def _checked_args(model, args) -> tuple[object, RLCEGRPOConfig]:
    """`model` and `args` with the offline model aliases (`smollm2-135m-instruct`, [`rlce_trl.models.MODEL_ALIASES`])
    as their local folders (the policy, the verifier and the partner), as every command resolves them. `args` `None`
    is the default `RLCEGRPOConfig` named after the model; anything but an `RLCEGRPOConfig` fails naming the fix."""
    model = resolve_model(model) if isinstance(model, str) else model
    if args is None:
        name = model if isinstance(model, str) else model.config._name_or_path
        return model, RLCEGRPOConfig(f"{str(name).split('/')[-1] or 'model'}-RLCE")
    if not isinstance(args, RLCEGRPOConfig):
        raise TypeError(
            f"RLCEGRPOTrainer needs an RLCEGRPOConfig, got {type(args).__name__}: build the same arguments with "
            "`RLCEGRPOConfig(...)` (it accepts every GRPOConfig field)."
        )
    for name in ("verifier_model_name_or_path", "partner_model_name_or_path"):
        setattr(args, name, resolve_model(getattr(args, name)))
    return model, args


def _as_list(value) -> list:
    return list(value) if isinstance(value, list) else [value]


def _user_rewards(reward_funcs, args: RLCEGRPOConfig) -> tuple[list, list[float] | None]:
    """Your `reward_funcs` as a list, and `args.reward_weights`, which weights them only."""
    user_funcs = [] if reward_funcs is None else _as_list(reward_funcs)
    user_weights = args.reward_weights
    if user_weights is not None and len(user_weights) != len(user_funcs):
        raise ValueError(
            f"reward_weights has {len(user_weights)} entries but {len(user_funcs)} reward_funcs were passed: in "
            "RLCEGRPOTrainer, reward_weights weights your own reward_funcs only; the RLCE rewards are weighted by "
            "rlce_verified_weight and rlce_format_weight."
        )
    return user_funcs, user_weights


class RLCEGRPOTrainer(VideoGRPOMixin, GRPOTrainer):
    """
    Trainer for Reinforcement Learning with Comparative Evidence (RLCE): [`~trl.GRPOTrainer`] with no gold labels,
    whose only change is where the reward comes from: each rollout group's answers are compared by a frozen copy of
    the initial model (pairwise evidence tests, validated against the prompt and aggregated), and the rollouts whose
    answer wins get `rlce_verified` = 1 (0 otherwise, `None` for a group with no verified answer), next to
    `rlce_format` (1 for a `\\boxed{}` answer). Groups are scored whole, each on one process; `rlce/*` metrics and
    `rlce_*` completion columns are logged; the scorer's state is saved with every checkpoint. Generation, loss,
    weight syncing, tools and environments are GRPO's; video rows (`args.video_input`) reach generation, every
    log-probability forward and the verifier. `docs/drop-in.md` lists every difference and every override.

    Example:

    ```python
    >>> from datasets import Dataset
    >>> from rlce_trl import RLCEGRPOConfig, RLCEGRPOTrainer

    >>> dataset = Dataset.from_list(
    ...     [{"prompt": [{"role": "user", "content": "Review: the food was cold. Positive or negative?"}],
    ...       "answer_options": ["positive", "negative"]}] * 16
    ... )
    >>> trainer = RLCEGRPOTrainer(
    ...     model="HuggingFaceTB/SmolLM2-135M-Instruct",
    ...     args=RLCEGRPOConfig(output_dir="SmolLM2-135M-RLCE"),
    ...     train_dataset=dataset,
    ... )
    >>> trainer.train()
    ```

    Args:
        model (`str`, [`~transformers.PreTrainedModel`] or [`~peft.PeftModel`]):
            As in [`~trl.GRPOTrainer`]; a model alias of `rlce-trl models` is resolved too. Unless `verifier` or
            `args.verifier_model_name_or_path` says otherwise, the verifier is this initial checkpoint, frozen (the
            PEFT base model, the reference model, or a copy loaded once per process).
        reward_funcs (`RewardFunc | list[RewardFunc]`, *optional*):
            Your reward functions, after the two RLCE ones; `args.reward_weights` weights yours only.
        args ([`RLCEGRPOConfig`], *optional*):
            Every [`~trl.GRPOConfig`] field plus the RLCE settings (`rlce_*`, `verifier_*`, `reward_method`, ...). If
            `None`, a default configuration named after the model is used.
        verifier ([`~rlce_trl.verifiers.base.Verifier`], *optional*):
            The frozen verifier; `None` builds one from `args` ([`~rlce_trl.verifiers.factory.VerifierFactory`]).
        group_scorer ([`~rlce_trl.scoring.GroupScorer`], *optional*):
            Your own group reward in place of RLCE's (as `args.reward_method` names a baseline).
        train_dataset, eval_dataset, processing_class, reward_processing_classes, callbacks, optimizers, peft_config,
        **kwargs:
            As in [`~trl.GRPOTrainer`]; rows are checked before any model loads, and `reward_processing_classes`
            belong to your `reward_funcs`.
    """

    _tag_names = ["trl", "grpo", "rlce"]
    _name = "RLCE-GRPO"
    _paper = {**PAPER, "citation": PAPER["citation"] + "\n\n" + GRPOTrainer._paper["citation"]}  # RLCE, on GRPO

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
        model, args = _checked_args(model, args)
        check_datasets(train_dataset, eval_dataset, args.rlce_labels_column, args,  # bad rows, too few: fail here
                       environments=kwargs.get("environment_factory") is not None)
        user_funcs, user_weights = _user_rewards(reward_funcs, args)
        if reward_processing_classes is not None:  # they belong to your reward_funcs, after the two RLCE ones
            reward_processing_classes = [None, None, *_as_list(reward_processing_classes)]
        self.check_video_dataset(train_dataset, args)  # video rows the settings cannot train: fail before loading
        group_scorer = as_group_scorer(group_scorer) if group_scorer is not None else None
        # Server verifiers and partners first: one that is down fails the run before any model loads.
        verifiers = VerifierFactory(args, model, verifier, peft_config=peft_config,
                                    own_scorer=group_scorer is not None, multimodal=dataset_sends_media(train_dataset),
                                    quantization_config=kwargs.get("quantization_config"))
        #: Prefix of the per-step metrics and name of the group reward: `rlce` for RLCE and its ablations, else the
        #: baseline's name.
        self.method_name = group_scorer.name if group_scorer is not None else scorer_name(args.reward_method)
        group_reward = _GroupReward("rlce_verified" if self.method_name == "rlce" else self.method_name)
        args.reward_weights = None  # TRL checks the length against all reward functions; set below
        try:
            format_reward = self._format_reward(group_scorer, args.reward_method)
            super().__init__(model=model, reward_funcs=[group_reward, format_reward, *user_funcs], args=args,
                             train_dataset=train_dataset, eval_dataset=eval_dataset, processing_class=processing_class,
                             reward_processing_classes=reward_processing_classes, callbacks=callbacks,
                             optimizers=optimizers, peft_config=peft_config, **kwargs)
        finally:
            args.reward_weights = user_weights
        for callback in self.callback_handler.callbacks:  # save through the trainer (gathered under ZeRO-3)
            if hasattr(callback, "bind_trainer"):
                callback.bind_trainer(self)
        self._video_setup()
        weights = [args.rlce_verified_weight, args.rlce_format_weight, *(user_weights or [1.0] * len(user_funcs))]
        self.reward_weights[: len(weights)] = torch.tensor(weights, dtype=torch.float32)
        #: The frozen verifier, and the frozen partner of a co-evolution phase (`partner_*`, passed to scorers that
        #: take `partner=`), built by [`~rlce_trl.verifiers.factory.VerifierFactory`].
        self.verifier, self.partner = verifiers.build(self)
        #: Scores whole rollout groups (a [`~rlce_trl.scoring.GroupScorer`]). The RLCE evidence pipeline by default.
        self.group_scorer: GroupScorer = group_scorer or build_scorer(
            args.reward_method, self.verifier, args.evidence_settings(), partner=self.partner,
            **(args.reward_method_kwargs or {}))
        is_main = self.accelerator.is_main_process
        if args.rlce_completions_keep:  # the completions tables of a long run (rlce_trl.retention)
            self.add_callback(CompletionsRetention(args.output_dir, args.rlce_completions_keep, is_main))
        #: The evidence audit trail (`<output_dir>/rlce_evidence.jsonl`, see `rlce_trl.audit`).
        self.evidence = EvidenceRecorder(os.path.join(args.output_dir, EVIDENCE_FILE), self.method_name,
                                         args.rlce_evidence_max_mb, args.rlce_evidence, is_main,
                                         args.rlce_evidence_rotate)
        #: The training-health monitor (`rlce_trl.health`, `health_*` settings), a callback; None when off.
        self.health: HealthMonitor | None = None
        if args.health_monitor:
            self.health = HealthMonitor(
                self.method_name, HealthThresholds.from_dict(args.health_thresholds), args.health_warmup_steps,
                args.health_window, args.health_stop, args.output_dir, self._metrics["train"],
                self.evidence.log if args.rlce_evidence else None, is_main,
                signal_patience=args.health_signal_patience)
            self.add_callback(self.health)
        #: With `report_to="trackio"`: each logged step's evidence as traces, alarms as alerts (`rlce_trl.tracking`).
        self.tracking: TrackioEvidence | None = attach_trackio(self)

    @staticmethod
    def _format_reward(group_scorer, reward_method: str):
        """The method's own format term when its scorer defines one (`format_reward`: the rubric baselines' answer tag
        plus justification, D.3), else RLCE's `\\boxed{}` one."""
        hook = group_scorer.format_reward if group_scorer is not None else None
        return hook or method_hook(reward_method, "format_reward") or rlce_format

    # -- rewards --------------------------------------------------------------------------------------------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """Override: TRL scores completions one by one; RLCE gathers whole groups, scores each once, and hands every
        process its slice."""
        mode = "train" if self.model.training else "eval"
        num_generations = self.num_generations if mode == "train" else self.num_generations_eval
        rank = self.accelerator.process_index
        labels_column = self.args.rlce_labels_column

        # 1. Whole groups: every process sees the whole generation batch, in sampler order.
        wanted = tuple(self.group_scorer.columns)  # dataset columns the scorer reads (Group.columns)
        local = [
            (p, completion_text(c), ex.get(labels_column), ex.get("question"), {k: ex.get(k) for k in wanted})
            for p, c, ex in zip(prompts, completions, inputs, strict=True)
        ]
        batch = gather_object(local)
        rows, texts, labels, questions, extra = (list(column) for column in zip(*batch, strict=True))
        if getattr(self, "environment_factories", None) is not None:
            check_environment_prompts(rows, num_generations)
        groups = build_groups(rows, texts, labels, num_generations, questions, extra if wanted else None)

        # 2. Each group scored once, by process g % world; every process reports to every other.
        reports: list[RankReport] = gather_object([self._score_own_groups(groups)])
        failures = [r.failure for r in reports if r.failure]
        if any(r.scorer_bug for r in reports):
            raise RuntimeError("\n".join(failures))
        if failures:
            detail = "; ".join(" ".join(failure.split()) for failure in failures)  # one line on every rank
            error = VerifierUnavailableError(
                f"the verifier failed persistently, so no rewards can be computed ({detail}); check the verifier "
                "server (its URL, its log), or raise verifier_max_consecutive_failures.")
            error.every_process = True  # raised on every process at once: train() may save collectively
            raise error

        # 3. Back in group order; the batch hook sees every group on every process; this process keeps its slice.
        by_group = {g: result for report in reports for g, result in report.results}
        results = self.group_scorer.finalize_batch(groups, [by_group[g] for g in range(len(groups))])
        step = self.state.global_step + (mode == "train")  # the step these rewards are logged under
        ids = self.evidence.next_ids(mode, step, len(groups))
        if mode == "train" and self.health is not None:  # read at the end of the optimizer step
            self.health.observe(step, groups, results, StepStats.merge([r.stats for r in reports]).verdicts)
        start = rank * len(prompts)
        columns = {name: values[start : start + len(prompts)]
                   for name, values in completion_columns(results, ids).items()}
        for name, values in columns.items():
            self._log_completion_extra(name, values)
        # The group reward for _GroupReward; the other columns for your own (Elect's gate reads rlce_verified_answer).
        verified = [r for result in results for r in result.verified]
        columns[GROUP_REWARD_COLUMN] = verified[start : start + len(prompts)]
        inputs = [{**ex, **{name: values[i] for name, values in columns.items()}} for i, ex in enumerate(inputs)]

        self._log_rlce_metrics(mode, [r.stats for r in reports], [r.work for r in reports])
        unscored = sum(all(v is None for v in result.verified) for result in results)  # the documented treatment
        self._metrics[mode][f"{self.method_name}/unscored_fraction"].append(unscored / max(len(results), 1))
        # State built across steps (static tests, rubric buffers) follows the prompt, whichever process scored it.
        for report in reports:
            if report.rank != rank and report.state_updates:
                self.group_scorer.apply_state_updates(report.state_updates)
        # Written once, by the main process, with every group's evidence (its state is now complete too).
        if self.accelerator.is_main_process:
            records = [self.evidence.record(group, result, gid, step, mode, self.group_scorer)
                       for group, result, gid in zip(groups, results, ids, strict=True)]
            self.evidence.write(records, self.state.global_step)
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._warn_user_rewards_all_none(rewards_per_func[start : start + len(prompts)], inputs, prompts, completions,
                                         set(columns))
        return rewards_per_func

    def _warn_user_rewards_all_none(self, local_rewards, inputs, prompts, completions, added: set[str]) -> None:
        """TRL's "All reward functions returned None" warning, for your own reward sources (`reward_funcs`, an
        environment's `get_reward`): TRL's cannot fire, since `rlce_format` always returns a number. `added`: the
        per-completion columns this trainer put into `inputs`, left out of the message."""
        yours = local_rewards[:, len(RLCE_REWARD_NAMES):]
        if yours.shape[1] == 0:
            return
        unscored = torch.isnan(yours).all(dim=1).nonzero()
        if len(unscored):
            row = int(unscored[0, 0])
            shown = {k: v for k, v in inputs[row].items()
                     if k not in ("prompt", "completion", "completion_ids") and k not in added}
            shown.update(prompt=prompts[row], completion=completions[row])
            logger.warning(
                "All your reward functions returned None for the following kwargs:\n%s\nThe RLCE rewards still score "
                "it; ensure that at least one of your reward functions returns a valid reward.", shown)

    def _score_own_groups(self, groups) -> RankReport:
        """Score the groups this process owns (`g % num_processes == rank`). A verifier outage or a scorer bug is
        reported, not raised, so that every process reaches the gather and raises together."""
        rank, world = self.accelerator.process_index, self.accelerator.num_processes
        owned = list(range(rank, len(groups), world))
        before = self.verifier.stats.snapshot()
        failure, scorer_bug = None, False
        try:
            results, stats = self.group_scorer.score([groups[g] for g in owned])
            if len(results) != len(owned):
                failure = (f"process {rank}: {self.method_name} returned {len(results)} results for {len(owned)} "
                           "groups; a group scorer returns one GroupResult per group, in order.")
                results, stats, scorer_bug = [], StepStats(), True
        except VerifierUnavailableError as error:
            results, stats, failure = [], StepStats(), f"process {rank}: {error}"
        work = self.verifier.stats.since(before)
        packed = list(zip(owned, results, strict=True)) if failure is None else []
        return RankReport(rank, packed, stats, work, self.group_scorer.pop_state_updates(), failure, scorer_bug)

    def _log_rlce_metrics(self, mode: str, per_rank: list[StepStats], work) -> None:
        total = StepStats.merge(per_rank)
        named = [*total.metrics().items()]
        named += [(f"parse_failures/{reason}", float(count))
                  for reason, count in sorted((total.verdict_failures + total.construction_failures).items())]
        named += [
            ("verifier_seconds", max(w.seconds for w in work)),  # ranks work in parallel
            ("verifier_calls", float(sum(w.calls for w in work))),
            ("verifier_generated_tokens", float(sum(w.generated_tokens for w in work))),
            ("verifier_failed_requests", float(sum(w.failed_requests for w in work))),
            *self.verifier.transport_metrics().items(),  # server and colocate: cumulative counters
        ]
        for name, value in named:  # `<method>/<name>`: `rlce` for RLCE and its ablations, else the scorer's name
            self._metrics[mode][f"{self.method_name}/{name}"].append(value)
        failures = total.verdict_failures
        if failures:
            logger.info("%s: %d unreadable verdicts counted as abstentions (%s).", self.method_name,
                        sum(failures.values()), ", ".join(f"{k}={v}" for k, v in sorted(failures.items())))

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """Override: TRL logs `None` for a metric with no value in the window (no group scored); it is left out, so
        `log_metrics` / `save_metrics` never meet a None (`<method>/unscored_fraction` counts unscored groups)."""
        metrics = self._metrics["train" if self.model.training else "eval"]
        for key in [k for k, values in metrics.items() if not any(v == v for v in values)]:  # all NaN, or none
            del metrics[key]
        super().log(logs, start_time)

    # -- model card ---------------------------------------------------------------------------------------------------
    #: Dataset and recipe names for the model card; the example scripts fill it (`{"dataset": ..., "recipe": ...}`).
    rlce_card_info: dict | None = None

    def create_model_card(self, model_name=None, dataset_name=None, tags=None):
        """Override: TRL's card gets the RLCE section (method, verifier, reward settings, dataset, recipe; no
        credentials) and the trackio Space's badge and tags, also once the trackio run is closed."""
        tracking = getattr(self, "tracking", None)
        space = tracking.space_url if tracking is not None else None
        super().create_model_card(model_name=model_name, dataset_name=dataset_name,
                                  tags=with_trackio_tags(tags, space))
        if self.is_world_process_zero():
            from .report import card_section  # the training report, built next to the card

            readme = os.path.join(self.args.output_dir, "README.md")
            link_model_card(readme, space)
            add_rlce_section(self, readme, dataset_name, report=card_section(self.args.output_dir))

    def train(self, resume_from_checkpoint=None, *args, **kwargs):
        """Override: on any error the verifier processes the trainer started are stopped. A Ctrl-C saves the last
        finished step's checkpoint and raises `TrainingInterrupted` (one recorded while models loaded ends the run
        before training); a verifier that failed for good (on every process together) saves it first too. The next
        `train()` in the same `output_dir` resumes there (`rlce_trl.interrupted`)."""
        raise_if_interrupted()
        resume_from_checkpoint = interrupted_checkpoint(self.args.output_dir, resume_from_checkpoint)
        try:
            output = super().train(resume_from_checkpoint, *args, **kwargs)
        except KeyboardInterrupt as error:
            saved = save_interrupted(self)
            self._close_verifiers()
            raise saved from error
        except BaseException as error:
            if getattr(error, "every_process", False):
                save_after_verifier_failure(self)
            self._close_verifiers()
            raise
        if self.is_world_process_zero():  # the metrics `rlce-trl report` draws, also for a run without checkpoints
            os.makedirs(self.args.output_dir, exist_ok=True)
            self.state.save_to_json(os.path.join(self.args.output_dir, "trainer_state.json"))
            clear_interrupted(self.args.output_dir)
        if self.health is not None and self.health.stopped_without_signal is not None:
            self._close_verifiers()
            raise NoLearningSignalError(self.health.stopped_without_signal.line)  # the checkpoint is saved
        return output

    def _close_verifiers(self) -> None:
        for model in (self.verifier, self.partner):
            if model is not None:
                model.close()

    def _save_checkpoint(self, model, trial):
        """Override: the scorer's state (static tests, rubrics) is saved with each checkpoint."""
        super()._save_checkpoint(model, trial)
        state = self.group_scorer.state_dict()
        if self.args.should_save and any(state.values()):
            folder = os.path.join(self._get_output_dir(trial=trial), f"checkpoint-{self.state.global_step}")
            write_json(state, os.path.join(folder, SCORER_STATE_FILE))

    def _load_optimizer_and_scheduler(self, checkpoint):
        """Override: and restored on resume, as TRL restores its own entropy-controller state."""
        super()._load_optimizer_and_scheduler(checkpoint)
        path = os.path.join(checkpoint, SCORER_STATE_FILE) if checkpoint else None
        if path and os.path.exists(path):
            with open(path) as f:
                self.group_scorer.load_state_dict(json.load(f))
            logger.info("RLCE: scorer state (static tests, rubrics) restored from %s.", path)
