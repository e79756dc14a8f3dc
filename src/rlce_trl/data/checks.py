"""Checks of dataset rows, run when a dataset is handed over (the trainer's `__init__`, `rlce-trl evaluate`), so a bad
row fails at once with its index and the fix instead of deep inside TRL or the evidence code after generation.

A row must have a `prompt`: a non-empty string, or a non-empty list of messages `{"role": str, "content": ...}` whose
content is a string or a list of content parts (`{"type": "text", "text": ...}`, `{"type": "video"}`, ...), with some
text or media in it. The labels column (`answer_options` by default), when present and not empty, must be a list of
non-empty strings; missing, `None` or `[]` means free text. With TRL's `environment_factory` a row may have no
`prompt` (the environment's `reset()` supplies it; a multi-environment row holds only its `environment` field); a
`prompt` it has is checked as above. Rows the policy learns from carry no gold column ([`check_no_gold`], run by the
training pipeline on every training set): TRL hands every dataset column to the reward functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..errors import InputError

MAX_REPORTED = 5


def prompt_problem(prompt) -> str | None:
    """Why `prompt` cannot be used (`None` when it can)."""
    if prompt is None:
        return "`prompt` is missing (None)"
    if isinstance(prompt, str):
        return None if prompt.strip() else "`prompt` is an empty string"
    if not isinstance(prompt, (list, tuple)):
        return f"`prompt` is a {type(prompt).__name__}; give a string or a list of chat messages"
    if not prompt:
        return "`prompt` is an empty list of messages"
    has_content = False
    for k, message in enumerate(prompt):
        if not isinstance(message, dict):
            return f"`prompt` message {k} is a {type(message).__name__}, not a {{'role', 'content'}} object"
        if not isinstance(message.get("role"), str) or not message.get("role"):
            return f"`prompt` message {k} has no `role` string"
        content = message.get("content")
        if isinstance(content, str):
            has_content = has_content or bool(content.strip())
        elif isinstance(content, (list, tuple)):
            for part in content:
                if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                    return f"`prompt` message {k} has a content part that is not a {{'type': ...}} object"
                if part["type"] == "text" and not isinstance(part.get("text"), str):
                    return f"`prompt` message {k} has a text part whose `text` is not a string"
                has_content = has_content or part["type"] != "text" or bool(part["text"].strip())
        else:
            return (f"`prompt` message {k} has `content` of type {type(content).__name__}; it must be a string "
                    "(or a list of content parts)")
    return None if has_content else "every message of `prompt` is empty"


def labels_problem(labels) -> str | None:
    """Why a closed label set cannot be used (`None` when it can, or when it is empty: free text)."""
    if labels is not None and not isinstance(labels, (list, tuple)):
        return f"is a {type(labels).__name__}; give a list of label strings (or [] for free text)"
    bad = [label for label in labels or () if not isinstance(label, str) or not label.strip()]
    return f"holds {bad[0]!r}; every label must be a non-empty string" if bad else None


def row_problems(row, labels_column: str | None = "answer_options", required: Iterable[str] = (),
                 prompt_optional: bool = False) -> list[str]:
    """Every problem of one row. `prompt_optional`: an environment supplies the prompt (`environment_factory`)."""
    if not isinstance(row, dict):
        return [f"the row is a {type(row).__name__}, not an object"]
    problems = [f"no `{name}` field" for name in required if name not in row]
    if "prompt" not in row and not prompt_optional:
        problems.append("no `prompt` field")
    elif "prompt" in row and (problem := prompt_problem(row["prompt"])):
        problems.append(problem)
    if labels_column and labels_column in row and (problem := labels_problem(row[labels_column])):
        problems.append(f"`{labels_column}` {problem}")
    return problems


def check_rows(rows: Iterable, where: str = "dataset", labels_column: str | None = "answer_options",
               required: Iterable[str] = (), fix: str | None = None, prompt_optional: bool = False) -> None:
    """Raise [`InputError`] naming the first bad rows (index and problem) and the fix; silent when every row is
    usable. `rows`: dicts, or a `datasets.Dataset` (an `IterableDataset` is not read: it cannot be rewound)."""
    if type(rows).__name__ == "IterableDataset":
        return
    required = tuple(required)
    found = [f"row {index}: {'; '.join(problems)}" for index, row in enumerate(rows)
             if (problems := row_problems(row, labels_column, required, prompt_optional))]
    if found:
        more = f" (and {len(found) - MAX_REPORTED} more rows)" if len(found) > MAX_REPORTED else ""
        fix = fix or ("give each row a non-empty `prompt` (a string or a list of {'role', 'content': str} messages) "
                      f"and, for closed-label tasks, `{labels_column}` as a list of label strings")
        raise InputError(f"{where} has {len(found)} unusable row(s){more}: " + " | ".join(found[:MAX_REPORTED])
                         + f". Fix: {fix}.")


def check_datasets(train_dataset, eval_dataset=None, labels_column: str | None = "answer_options",
                   args=None, environments: bool = False) -> None:
    """[`check_rows`] on a trainer's datasets (`eval_dataset` may be a dict of datasets, as TRL allows); with the
    trainer's `args`, also [`check_one_batch`] on the training set. `environments`: the trainer has an
    `environment_factory`, whose `reset()` supplies the prompt of a row without one."""
    if train_dataset is not None:
        check_rows(train_dataset, "train_dataset", labels_column, prompt_optional=environments)
        if args is not None and hasattr(train_dataset, "__len__"):
            check_one_batch(len(train_dataset), args)
    evals = eval_dataset if isinstance(eval_dataset, dict) else {"": eval_dataset}
    for name, dataset in evals.items():
        if dataset is not None:
            check_rows(dataset, f"eval_dataset{f'[{name!r}]' if name else ''}", labels_column,
                       prompt_optional=environments)


def check_one_batch(prompts: int, args) -> None:
    """Stop a run that would train nothing: TRL's sampler keeps only whole generation batches of
    `generation_batch_size / num_generations` distinct prompts, so a smaller training set gives 0 steps."""
    needed = args.generation_batch_size // args.num_generations
    if prompts < needed:
        raise InputError(f"The training set has {prompts} prompt(s), fewer than the {needed} one generation batch "
                         f"needs (generation_batch_size {args.generation_batch_size} / num_generations "
                         f"{args.num_generations}): add rows, or lower per_device_train_batch_size or "
                         "steps_per_generation.")


#: Columns that hold a gold answer in rlce-trl rows (`gold`) or in raw task records (`answer`, `label`).
GOLD_COLUMNS = ("gold", "gold_answer", "answer", "label", "labels")


def check_no_gold(rows: Sequence[dict], what: str = "training") -> None:
    """Raise when a row meant for adaptation or training carries a gold answer."""
    for i, row in enumerate(rows):
        found = [c for c in GOLD_COLUMNS if c in row]
        if found:
            raise InputError(f"{what} row {i} (id {row.get('id', '?')!r}) carries the gold answer in column "
                             f"{found[0]!r}: rows the policy learns from must not hold labels (TRL passes every "
                             "column to the rewards). Drop the column, or build the rows with "
                             "rlce_trl.data.checks.adaptation_rows.")


def adaptation_rows(rows: Sequence[dict]) -> list[dict]:
    """The rows without their gold answer (the evaluation keeps its own copy with gold)."""
    return [{k: v for k, v in row.items() if k not in GOLD_COLUMNS} for row in rows]
