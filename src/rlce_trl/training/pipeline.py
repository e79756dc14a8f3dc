"""The one training pipeline ([`train`]) that every run goes through (the training scripts, `rlce-trl train` and
`check`, test-time adaptation, each co-evolution phase), in the shape of TRL's own `trl/scripts/grpo.py` (the trainer,
`train()`, `save_model()`, `push_to_hub()`), plus what is not TRL's: model aliases (`smollm2-135m-instruct`, converted
offline), the prompt-length filter (TRL 1.16's `GRPOConfig` has no prompt limit; verl's `filter_overlong_prompts`),
validation with the best checkpoint kept, and secrets kept out of what is saved (`--hub_token` becomes `HF_TOKEN`;
the model card names the recipe by its file name only).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, fields

from ..data import to_dataset
from ..data.checks import adaptation_rows, check_no_gold
from ..data.hba import check_clips, with_frames
from ..data.jsonl import write_json
from ..data.prompts import Prompting, save_prompting
from ..data.tasks import judge_of, load_task
from ..errors import InputError
from ..models import check_model_source, resolve_model
from .disk import CheckpointSizeCallback, folder_bytes, human, link_final_weights
from .preflight import preflight_hook
from .tta import PassEvaluationCallback

logger = logging.getLogger(__name__)


def prepare_run(script_args, training_args, model_args) -> None:
    """Resolve model aliases, apply the model arguments the way TRL's script does, size a co-located verifier's
    context from the prompt filter, and keep secrets out of the saved training arguments."""
    model_args.model_name_or_path = resolve_model(model_args.model_name_or_path)
    check_model_source(model_args.model_name_or_path, "model_name_or_path")
    for name in ("verifier_model_name_or_path", "partner_model_name_or_path"):  # RLCE's (a stock GRPOConfig: none)
        if hasattr(training_args, name):
            setattr(training_args, name, resolve_model(getattr(training_args, name)))
            check_model_source(getattr(training_args, name), name)
    given = {"revision": model_args.model_revision, "trust_remote_code": training_args.trust_remote_code,
             "attn_implementation": model_args.attn_implementation, "dtype": model_args.dtype}
    training_args.model_init_kwargs = {**{k: v for k, v in given.items() if v is not None},
                                       **(training_args.model_init_kwargs or {})}
    if getattr(training_args, "verifier_mode", None) == "colocate" and training_args.verifier_max_model_length is None:
        from ..verifiers.sizing import verifier_max_model_length  # the prompt filter bounds the verifier's requests

        training_args.verifier_max_model_length = verifier_max_model_length(training_args,
                                                                            script_args.max_prompt_length)
    if training_args.hub_token:  # `training_args.bin` is pickled with every save and uploaded by push_to_hub
        os.environ["HF_TOKEN"] = training_args.hub_token
        training_args.hub_token = None


def add_prompt_suffix(rows: list[dict], suffix: str | None) -> list[dict]:
    """Rows whose last user turn ends with `suffix` (text content or the last text block); a row with its own
    `answer_instruction` (a task file's, [`rlce_trl.data.tasks`]) ends with that instead (a recipe's suffix is a
    generic format reminder; the task's names its labels)."""
    out = []
    for row in rows:
        suffix_of_row = row.get("answer_instruction") or suffix
        if not suffix_of_row:
            out.append(row)
            continue
        prompt = [dict(m) for m in row["prompt"]]
        last = max(i for i, m in enumerate(prompt) if m["role"] == "user")
        content = prompt[last]["content"]
        if isinstance(content, str):
            prompt[last]["content"] = f"{content} {suffix_of_row}"
        else:
            blocks = [dict(b) for b in content]
            texts = [i for i, b in enumerate(blocks) if b.get("type") == "text"]
            if texts:
                blocks[texts[-1]]["text"] = f"{blocks[texts[-1]]['text']} {suffix_of_row}"
            else:
                blocks.append({"type": "text", "text": suffix_of_row})
            prompt[last]["content"] = blocks
        out.append({**row, "prompt": prompt})
    return out


def filter_long_prompts(rows: list[dict], tokenizer_path: str, max_prompt_length: int | None,
                        chat_template_kwargs=None, max_completion_length: int | None = None):
    """Rows whose chat-templated prompt (generation prompt included) has at most `max_prompt_length` tokens. Unset,
    the limit is the model's context (`max_position_embeddings`) less `max_completion_length`: a longer prompt cannot
    be generated from, so it is dropped with a count and a line saying so (all of them: an [`InputError`])."""
    limit, what = max_prompt_length, f"max_prompt_length={max_prompt_length}"
    if not max_prompt_length:
        context = model_context(tokenizer_path)
        if context is None:
            return rows
        limit = context - (max_completion_length or 0)
        what = f"the model's context of {context} tokens less max_completion_length={max_completion_length or 0}"
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    kept, shortest = [], None
    for row in rows:
        ids = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True, return_dict=True,
                                            **(chat_template_kwargs or {}))["input_ids"]
        shortest = len(ids) if shortest is None else min(shortest, len(ids))
        if len(ids) <= limit:
            kept.append(row)
    if rows and not kept and max_prompt_length:
        raise InputError(f"All {len(rows)} rows are longer than max_prompt_length={max_prompt_length} prompt "
                         f"tokens (the shortest has {shortest}): raise max_prompt_length to at least {shortest}, "
                         "or unset it.")
    if rows and not kept:
        raise InputError(f"All {len(rows)} prompts are longer than {what} (the shortest has {shortest} tokens): "
                         "shorten the prompts, lower max_completion_length, or use a model with a longer context.")
    if len(kept) < len(rows):
        line = (f"Dropped {len(rows) - len(kept)} of {len(rows)} rows whose prompt is longer than {limit} tokens "
                f"({what})" + ("" if max_prompt_length else "; set max_prompt_length to choose the limit") + ".")
        logger.warning(line)
    return kept


def model_context(name_or_path: str) -> int | None:
    """The model's context in tokens (`max_position_embeddings` of its text config), or `None` when its config does
    not say or cannot be read (the length filter is then off)."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(name_or_path)
    except Exception as error:  # noqa: BLE001 - the model loads (or fails, naming why) later; only the filter is off
        logger.info("No context length for %s (%s): prompts are not checked against it.", name_or_path, error)
        return None
    context = getattr(config.get_text_config(), "max_position_embeddings", None)
    return context if isinstance(context, int) and context > 0 else None


def validation_callbacks(script_args, training_args, rows: list[dict] | None, needs_judge: bool, prefeval_dir=None,
                         media_root=None):
    """`[BestCheckpointCallback]` when `validation_steps` is set, else `[]`."""
    if not script_args.validation_steps:
        return []
    if not rows:
        raise InputError("validation_steps is set but there are no validation rows: give a validation split, or "
                         "unset validation_steps.")
    judge = make_judge(script_args, rows, prefeval_dir) if needs_judge else None
    from ..evaluation.callbacks import BestCheckpointCallback, make_validation_fn

    rows = rows[: script_args.validation_limit] if script_args.validation_limit else rows
    validate = make_validation_fn(rows, os.path.join(training_args.output_dir, "validation"), judge=judge,
                                  max_new_tokens=script_args.validation_max_new_tokens, media_root=media_root)
    return [BestCheckpointCallback(validate, eval_steps=script_args.validation_steps,
                                   patience=script_args.validation_patience)]


def make_judge(script_args, rows: list[dict], prefeval_dir=None):
    """The LLM judge of free-text rows (PrefEval, IntentQA) from `judge_base_url` / `judge_model`."""
    if not (script_args.judge_base_url and script_args.judge_model):
        raise InputError("Validation of free-text rows needs an LLM judge: set judge_base_url and judge_model (any "
                         "OpenAI-compatible endpoint, e.g. `vllm serve`), or unset validation_steps.")
    from ..evaluation.evaluate import Judge
    from ..evaluation.judges import OpenAIJudgeClient, load_prefeval_judge_prompts

    client = OpenAIJudgeClient(script_args.judge_base_url, script_args.judge_model,
                               api_key_env=script_args.judge_api_key_env)
    prompts = load_prefeval_judge_prompts(prefeval_dir) if judge_of(rows[0].get("task")) == "prefeval_checks" else None
    return Judge(client, prompts)


def card_info(trainer, dataset: str, script_args, rows: int, repeated: int) -> None:
    """What the RLCE model card names besides the trainer's own settings: the dataset, the recipe and, for test-time
    adaptation, the split adapted on; the prompt suffix, for the card's quick start; the training rows and how many
    were repeated to fill one batch ([`fill_one_batch`])."""
    trainer.rlce_card_info = {"dataset": dataset, "recipe": script_args.recipe, "rows": rows,
                              "rows_repeated": repeated, "prompt_suffix": script_args.prompt_suffix}
    if trainer.accelerator.is_main_process:  # the report's title: the task's display name
        from ..report import RUN_FILE

        write_json({"title": dataset}, os.path.join(trainer.args.output_dir, RUN_FILE))
    if script_args.tta_split:
        passes = trainer.args.num_train_epochs
        trainer.rlce_card_info["adaptation"] = (f"test-time adaptation on the unlabelled `{script_args.tta_split}` "
                                                f"split ({passes:g} pass{'es' * (passes != 1)}, gold withheld until "
                                                "the per-pass evaluation)")


def text_only(rows: list[dict]) -> list[dict]:
    """Rows whose messages are plain strings without the video blocks (`video_input: text`: a text-only policy)."""
    def flatten(content):
        if isinstance(content, str):
            return content
        return "\n".join(b["text"] for b in content if b.get("type") == "text" and b.get("text"))

    return [{**{k: v for k, v in row.items() if k != "videos"},
             "prompt": [{"role": m["role"], "content": flatten(m["content"])} for m in row["prompt"]]}
            for row in rows]


def method_rows(rows: list[dict], reward_method: str, labels_column: str = "answer_options") -> list[dict]:
    """The training rows as the reward method's policy is prompted: a method whose scorer defines `policy_rows` (the
    rubric baselines: answer tag plus justification, D.3) rewrites the prompts; every other method keeps them."""
    from rlce_trl.methods import method_hook

    hook = method_hook(reward_method, "policy_rows")
    return hook(rows, labels_column) if hook else rows


@dataclass
class TaskRows:
    """What a task hands the training pipeline ([`train`]).

    Args:
        train: the training rows (policy prompts, no gold); with `tta_split`, the adaptation split with its gold (the
            pipeline evaluates on it and trains on it without the gold).
        validation: the validation rows with their gold (may be empty).
        description: the dataset as the model card names it.
        free_text: whether validation needs the LLM judge (free-text answers: PrefEval, IntentQA).
        media_root: the folder the rows' clips are relative to; `None` for text prompts.
        prefeval_dir: the PrefEval checkout the judge's prompts come from, for PrefEval rows.
        fill_batch: repeat fewer rows than one generation batch to fill it ([`fill_one_batch`]; a co-evolution phase,
            whose build may retain few rows); otherwise such a run is refused (`data.checks.check_one_batch`).
    """

    train: list[dict]
    validation: list[dict]
    description: str
    free_text: bool
    media_root: str | None = None
    prefeval_dir: str | None = None
    fill_batch: bool = False


def task_file_rows(script_args) -> TaskRows:
    """The rows of the `--task` file: its train split without the gold (with `tta_split`, that split with its gold,
    which the pipeline withholds from training), and its validation split with the gold when it has one. Every
    problem is one line, before a model loads."""
    task = load_task(script_args.task)
    if script_args.tta_split:
        train_rows = task.rows(script_args.tta_split, with_gold=True)
        validation_rows = []
    else:
        train_rows = task.rows("train", with_gold=False)
        validation_rows = task.rows("validation", with_gold=True) if "validation" in task.splits() else []
    return TaskRows(train=train_rows, validation=validation_rows, description=task.task.display_name,
                    free_text=task.task.needs_judge)


def prompting_of(script_args, training_args) -> Prompting:
    """How a run prompts its policy ([`Prompting`]): the recipe's suffix, the reward method, TRL's chat template
    keyword arguments. Recorded in the output folder by [`train`]; read by `rlce-trl evaluate` / `sample` /
    `select` / `check`."""
    return Prompting(prompt_suffix=script_args.prompt_suffix,
                     reward_method=getattr(training_args, "reward_method", None),  # a stock GRPOConfig: none
                     labels_column=getattr(training_args, "rlce_labels_column", "answer_options"),
                     chat_template_kwargs=dict(training_args.chat_template_kwargs or {}),
                     recipe=script_args.recipe)


def prompting_from_recipe(recipe) -> Prompting:
    """The [`Prompting`] a recipe (a [`~rlce_trl.training.recipes.Recipe`]) trains with, read from its values with
    the training arguments' defaults ([`prompting_of`] of the parsed recipe), without building a training config."""
    from ..config import RLCEGRPOConfig

    defaults = {f.name: f.default for f in fields(RLCEGRPOConfig) if f.name in ("reward_method", "rlce_labels_column")}
    values = recipe.values
    kwargs = values.get("chat_template_kwargs")
    return Prompting(prompt_suffix=values.get("prompt_suffix"),
                     reward_method=values.get("reward_method", defaults.get("reward_method")),
                     labels_column=values.get("rlce_labels_column", defaults.get("rlce_labels_column")),
                     chat_template_kwargs=dict(kwargs) if isinstance(kwargs, dict) else {}, recipe=recipe.path.name)


def policy_rows(rows: list[dict], prompting: Prompting) -> list[dict]:
    """THE policy prompt of every row, in training, evaluation, sampling, selection and `rlce-trl check` alike: the
    row's own answer instruction (a task file's: its labels and the `\\boxed{}` format) or else the recipe's prompt
    suffix, then the method's prompts (the rubric baselines' system prompt, [`method_rows`])."""
    rows = add_prompt_suffix(rows, prompting.prompt_suffix)
    if prompting.reward_method is None:
        return rows
    return method_rows(rows, prompting.reward_method, prompting.labels_column)


def train(script_args, training_args, model_args, task: TaskRows, reward_funcs=None, trainer_class=None):
    """The one training pipeline of every run (PrefEval, HBA, Elect, test-time adaptation, each co-evolution phase;
    any task's rows), in a fixed order:

    1. the model arguments ([`prepare_run`]);
    2. with `tta_split`, the first `validation_limit` rows of the split are evaluated with their gold after every pass
       and trained on without it ([`~rlce_trl.data.checks.adaptation_rows`]);
    3. the prompts as the policy sees them ([`policy_rows`]: prompt suffix, then the method's system prompt);
       the evaluation rows get the suffix;
    4. the length filter `max_prompt_length` on exactly those prompts (text prompts; a video prompt's frames are
       counted only by the processor, so video rows are bounded by the frame cap instead);
    5. no gold in the training rows; with `task.fill_batch`, one generation batch of rows ([`fill_one_batch`]); the
       dataset (video frames decoded when a row is read, after the clips are checked);
    6. validation and per-pass callbacks, the trainer, train and save ([`train_rlce`]).

    What a run adds to its task: `reward_funcs` (TRL's reward functions; their weights are `training_args.
    reward_weights`) and `trainer_class` (default [`RLCEGRPOTrainer`]; Elect's paper-faithful gold gate passes the
    stock `trl.GRPOTrainer` with a stock `trl.GRPOConfig`, which has no RLCE settings to apply)."""
    prepare_run(script_args, training_args, model_args)
    train_rows, validation_rows, eval_rows = task.train, task.validation, []
    if script_args.tta_split:
        eval_rows = train_rows[: script_args.validation_limit or None]
        train_rows = adaptation_rows(eval_rows)
    prompting = prompting_of(script_args, training_args)
    train_rows = policy_rows(train_rows, prompting)
    validation_rows = add_prompt_suffix(validation_rows, script_args.prompt_suffix)
    eval_rows = add_prompt_suffix(eval_rows, script_args.prompt_suffix)
    if training_args.process_index == 0 and preflight_hook() is None:  # evaluate/sample prompt as training did
        save_prompting(prompting, training_args.output_dir)
    if task.media_root is None:
        train_rows = filter_long_prompts(train_rows, model_args.model_name_or_path, script_args.max_prompt_length,
                                         training_args.chat_template_kwargs, training_args.max_completion_length)
    elif script_args.max_prompt_length and training_args.process_index == 0:
        logger.warning("max_prompt_length applies to text prompts; video prompts are bounded by the frame cap.")
    check_no_gold(train_rows)
    repeated = 0
    if task.fill_batch:
        batch = training_args.generation_batch_size // training_args.num_generations  # prompts per generation batch
        train_rows, repeated = fill_one_batch(train_rows, batch)
    train_dataset = to_dataset(train_rows)
    if task.media_root is not None:
        check_clips(train_rows + validation_rows, task.media_root)
        train_dataset = with_frames(train_dataset, task.media_root, **training_args.frame_kwargs())
    callbacks = validation_callbacks(script_args, training_args, validation_rows, needs_judge=task.free_text,
                                     prefeval_dir=task.prefeval_dir, media_root=task.media_root)
    if script_args.tta_split:
        judge = make_judge(script_args, eval_rows, task.prefeval_dir) if script_args.judge_base_url else None
        callbacks.append(PassEvaluationCallback(
            eval_rows, os.path.join(training_args.output_dir, "tta"), judge=judge, eval_base=script_args.tta_eval_base,
            method=f"{training_args.reward_method.upper()} (G={training_args.num_generations})",
            max_new_tokens=script_args.validation_max_new_tokens, media_root=task.media_root))
    return train_rlce(script_args, training_args, model_args, train_dataset, callbacks, task.description,
                      reward_funcs=reward_funcs, trainer_class=trainer_class, repeated=repeated)


def fill_one_batch(rows: list[dict], prompts: int) -> tuple[list[dict], int]:
    """Rows for at least one generation batch of `prompts` prompts: TRL's sampler drops an incomplete batch, so a run
    with fewer rows would train 0 steps. Fewer rows are repeated in order (every row at least once: the one step sees
    them all), with a warning; `(rows, added)`."""
    if not rows:
        raise InputError("There are no training rows: nothing to train on (give a split with rows).")
    if len(rows) >= prompts:
        return rows, 0
    logger.warning("%d rows for a batch of %d prompts: rows repeated to fill one batch", len(rows), prompts)
    return [rows[i % len(rows)] for i in range(prompts)], prompts - len(rows)


def train_rlce(script_args, training_args, model_args, train_dataset, callbacks, dataset: str, reward_funcs=None,
               trainer_class=None, repeated: int = 0):
    """The trainer (`RLCEGRPOTrainer` unless `trainer_class`) with the PEFT and quantization settings of `model_args`,
    its card's facts ([`card_info`]), then [`train_and_save`] (or, under `rlce-trl check`, the preflight's hook)."""
    from trl import get_peft_config, get_quantization_config

    if trainer_class is None:
        from ..trainer import RLCEGRPOTrainer as trainer_class
    trainer = trainer_class(reward_funcs=reward_funcs, model=model_args.model_name_or_path, args=training_args,
                            train_dataset=train_dataset, callbacks=[*callbacks, CheckpointSizeCallback()],
                            peft_config=get_peft_config(model_args),
                            quantization_config=get_quantization_config(model_args))
    card_info(trainer, dataset, script_args, len(train_dataset) - repeated, repeated)
    hook = preflight_hook()
    if hook is not None:  # `rlce-trl check`: the real trainer, one sampled step, no training
        return hook(trainer)
    train_and_save(trainer, training_args)
    return trainer


def train_and_save(trainer, training_args) -> None:
    """TRL's script tail: train (resuming if asked), save, push from every rank, end. The dataset is named in the
    RLCE section of the model card ([`card_info`]); TRL's own card line would link it as a Hub dataset.

    A run the training-health monitor stopped for lack of a learning signal saves no final model (its checkpoint
    holds the weights): its card and report say "no learning signal", and the error's line is the last one printed."""
    from ..health import NoLearningSignalError

    try:
        trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    except NoLearningSignalError:
        _report(trainer, training_args, push=False)
        end_run(trainer)
        raise
    except KeyboardInterrupt as error:  # the checkpoint of the last finished step is saved: add the report
        if getattr(error, "checkpoint", None) and trainer.accelerator.is_main_process:
            from ..report import build_report

            try:
                error.report = build_report(training_args.output_dir)[0]
            except Exception as failure:  # noqa: BLE001 -- the checkpoint is what matters
                logger.warning("No report for the interrupted run: %s", failure)
        raise
    trainer.accelerator.print("Training completed.")
    trainer.save_model(training_args.output_dir)
    trainer.accelerator.print(f"Model saved to {training_args.output_dir}.")
    if trainer.accelerator.is_main_process:  # one copy of the weights: the last checkpoint shares the final model's
        freed = link_final_weights(training_args.output_dir)
        if freed:
            size = human(folder_bytes(training_args.output_dir))
            trainer.accelerator.print(f"The last checkpoint shares the final model's weights (hard links, "
                                      f"{human(freed)} saved); {training_args.output_dir} takes {size}.")
    _report(trainer, training_args, push=training_args.push_to_hub)
    end_run(trainer)


def _report(trainer, training_args, push: bool) -> None:
    """The model card (or the push to the Hub), then the run report."""
    if push:
        # Every rank calls it: saving is a collective under ZeRO-3; only the main process uploads.
        trainer.push_to_hub()
        trainer.accelerator.print(f"Model pushed to the Hub as {trainer.hub_model_id}.")
    else:
        name = os.path.basename(os.path.normpath(training_args.output_dir))
        trainer.create_model_card(model_name=name)  # README.md next to the final weights (main process only)
    if trainer.accelerator.is_main_process:  # the run report: curves, every group's evidence, completions
        from ..report import build_report

        if not os.path.isfile(os.path.join(training_args.output_dir, "trainer_state.json")):
            trainer.save_state()  # the curves, from a stock GRPOTrainer too (RLCEGRPOTrainer.train writes them)

        trainer.accelerator.print(f"Training report: {build_report(training_args.output_dir)[0]} (open it in a "
                                  "browser)")


def end_run(trainer) -> None:
    """The end of a launch, on every rank: wait for the others (rank 0 may still be uploading to the Hub or writing
    the report), then finish the trackers and destroy the process group (`Trainer.end` on transformers >= 5.18, the
    same two calls on older ones). A rank that leaves while its peers still hold the group aborts at exit (SIGABRT in
    gloo's worker threads), and the launcher then reports the whole run as failed."""
    trainer.accelerator.wait_for_everyone()
    trainer.accelerator.end_training()
