"""The trainable policy's side of the prompts: its system prompt (paper figure 13), how a completion's text is read,
the answer instruction of a closed-label task, and the record of how a trained policy was prompted ([`Prompting`]).
The frozen verifier's prompts live in `rlce_trl.evidence.prompts`."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from ..errors import InputError
from .jsonl import write_json

#: System prompt of the trainable policy (figure 13): reason, then end with the answer in \boxed{}.
SOLVER_SYSTEM_PROMPT = (
    "You are a helpful assistant. Read the whole conversation carefully, including what the user has said about "
    "themselves earlier. Answer the final request, then end your response with your final answer written as "
    "\\boxed{your answer}."
)


def completion_text(completion) -> str:
    """The text of a completion, standard (`str`) or conversational (list of messages): the assistant's turns, without
    tool results (a turn that only calls a tool has empty or no content; a content-parts list gives its text)."""
    if isinstance(completion, str):
        return completion
    return "".join(_text(m.get("content")) for m in completion if m.get("role", "assistant") == "assistant")


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "".join(p.get("text") or "" for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


# -- the answer instruction of a task with closed labels -----------------------------------------------------------
#: A task file's default answer instruction when it has `labels` (`answer_instruction: auto`): the labels, and the
#: `\boxed{}` format RLCE and evaluation read answers from, with every label as its own example (no single example a
#: small model would copy).
LABELS_INSTRUCTION = "Answer with exactly one of {labels}, and end your response with {boxed}."


def labels_instruction(labels, template: str = LABELS_INSTRUCTION) -> str:
    """The answer instruction of a closed-label task: `template` with `{labels}` ("billing, shipping or technical")
    and `{boxed}` ("\\boxed{billing}, \\boxed{shipping} or \\boxed{technical}") filled in."""
    return template.replace("{labels}", _one_of(list(labels))).replace(
        "{boxed}", _one_of([f"\\boxed{{{label}}}" for label in labels]))


def answer_instruction(value, labels: tuple[str, ...] | None, where: str) -> str | None:
    """A task file's `answer_instruction`, resolved. The instruction is added to the last user turn of every prompt,
    in training, evaluation, sampling and `rlce-trl check` alike (`rlce_trl.training.pipeline.policy_rows`), instead of
    a recipe's `prompt_suffix`. `auto` (the default): with labels, [`labels_instruction`] ("Answer with exactly one
    of positive or negative, and end your response with \\boxed{positive} or \\boxed{negative}."); free text gets
    none (a recipe's `prompt_suffix` applies). `none`: no instruction. Any other text is the instruction, with
    `{labels}` and `{boxed}` filled in from the labels. A bad value is an `InputError` naming `where`."""
    if value is None or value is False or value == "none":
        return None
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{where}: `answer_instruction` must be auto, none or the instruction's text, not {value!r}.")
    if value == "auto":
        return labels_instruction(labels) if labels else None
    if not labels and ("{labels}" in value or "{boxed}" in value):
        raise InputError(f"{where}: `answer_instruction` names {{labels}} but the task has no `labels`: add them, or "
                         "write the instruction out.")
    return labels_instruction(labels, value.strip()) if labels else value.strip()


def _one_of(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


# -- how a policy was prompted in training (recorded in its output folder) -----------------------------------------
#: The file in a training run's output folder that records how the policy was prompted ([`Prompting`]).
PROMPTING_FILE = "rlce_prompting.json"


@dataclass(frozen=True)
class Prompting:
    """How the policy is prompted, beyond its rows' own messages: what the training pipeline adds to every prompt
    (`rlce_trl.training.pipeline.policy_rows`) and how it renders them (TRL's chat template with
    `chat_template_kwargs`). A training run records it in its output folder ([`PROMPTING_FILE`]); `rlce-trl
    evaluate`, `sample`, `select` and `check` prompt with it, so a trained model is evaluated on its training prompt.

    Args:
        prompt_suffix: the recipe's `prompt_suffix`, appended to the last user turn of rows without their own answer
            instruction.
        reward_method: the recipe's reward method (the rubric baselines rewrite the system prompt).
        labels_column: the rows' answer-options column.
        chat_template_kwargs: TRL's `chat_template_kwargs` (`None`: rendered as given, nothing added).
        recipe: the recipe's file name, for messages.
    """

    prompt_suffix: str | None = None
    reward_method: str | None = None
    labels_column: str = "answer_options"
    chat_template_kwargs: dict | None = None
    recipe: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> Prompting:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


def save_prompting(prompting: Prompting, folder: str | os.PathLike) -> Path:
    """Write `prompting` into `folder` ([`PROMPTING_FILE`])."""
    path = Path(folder) / PROMPTING_FILE
    write_json(prompting.to_dict(), path)
    return path


def find_prompting(model_path: str | os.PathLike) -> tuple[Prompting, Path] | None:
    """The prompting recorded for a trained model: in its folder, or in the folder above (a `checkpoint-N` or `best`
    inside a run's output folder); `None` when neither records one (a model not trained by rlce-trl). An unreadable
    record is an [`InputError`]."""
    folder = Path(os.path.expanduser(os.fspath(model_path)))
    for candidate in (folder / PROMPTING_FILE, folder.parent / PROMPTING_FILE):
        if candidate.is_file():
            try:
                values = json.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ValueError) as error:
                raise InputError(f"{candidate} is unreadable ({type(error).__name__}): restore it from the run, "
                                 "delete it, or pass --config <the recipe it was trained with>.") from None
            if not isinstance(values, dict):
                raise InputError(f"{candidate} is not a prompting record: delete it, or pass --config <recipe>.")
            return Prompting.from_dict(values), candidate
    return None
