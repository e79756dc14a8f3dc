"""Tasks: what a task is to every wing (its answer options or free text, its gold column, its metric, its display
name), and a user's own task as one YAML file with no code.

The paper's tasks are registered here ([`TASKS`]); [`load_task`] reads a user's task file and registers it, so that
evaluation scores its rows with its metric. A task file:

    name: review_sentiment                  # the rows' `task` (letters, digits, _)
    display_name: Review sentiment          # optional; defaults to the name
    data:                                   # split -> a local JSON / JSONL / CSV / Parquet file (relative to
      train: train.jsonl                    #   this file); or `data: org/name`, a Hub dataset id loaded with
      validation: validation.jsonl          #   `datasets` (its own splits)
      test: test.jsonl
    prompt: "Review: {text}\\nIs it positive or negative?"   # a template over columns; or `prompt_column: text`;
                                            #   neither: the rows' conversational `prompt` column
    system_prompt: You judge reviews.       # optional
    labels: [positive, negative]            # the answer options; leave out for free text
    gold: label                             # the gold column: evaluation only, never in a training row
    metric: accuracy                        # accuracy | weighted_f1 (labels); exact_match | judge_accuracy (free text)
    answer_instruction: auto                # optional: the answer format's instruction (`rlce_trl.data.prompts`)

Every problem (an unknown key, a missing column, a gold column the prompt would show, an unknown metric, an empty
split, a gold value outside the labels) is one [`InputError`], raised before any model loads.
"""

from __future__ import annotations

import os
import re
import string
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ..errors import InputError, MissingInputError, did_you_mean, first_line
from .files import check_data_file
from .prompts import answer_instruction

#: Metric name -> what it scores (the functions are in `rlce_trl.evaluation.metrics.METRIC_FUNCTIONS`).
METRICS = {
    "accuracy": "share of rows whose extracted answer equals the gold label",
    "weighted_f1": "per-label F1 averaged with weights equal to each label's gold support",
    "binary_weighted_f1": "MOSEI: labels collapsed to polarity, neutral gold rows dropped, weighted F1",
    "exact_match": "share of rows whose extracted answer equals the gold text (case and spaces ignored)",
    "judge_accuracy": "share of rows an LLM judge accepts (needs --judge_base_url and --judge_model)",
}
#: The metrics that read answer options (closed labels); the others score free text.
LABEL_METRICS = ("accuracy", "weighted_f1", "binary_weighted_f1")


#: Judge name (a task's `judge`) -> how it scores (the judges are in `rlce_trl.evaluation.judges.JUDGES`).
JUDGES = {
    "reference": "an LLM judge compares the response with the gold answer (question, gold, response; JSON verdict)",
    "prefeval_checks": "PrefEval's four `error_type/` checks (acknowledge, hallucination, violation, helpful)",
}


@dataclass(frozen=True)
class PaperResults:
    """A task's column in the paper's comparison (Table 1 with Table 6's spreads, Tables 3-4) and RLCE's schedule on
    it (appendix C.2); [`rlce_trl.comparison.paper`] assembles the tables from these.

    Args:
        column: the column's place in Table 1 (0 first).
        title: the column's title.
        metric: the metric as the table names it.
        base: the base model's test score (percent).
        table1: method -> (mean over three seeds, std) (percent).
        ablations: method -> score of the single ablation run (Tables 3-4).
        rlce_schedule: (examples per cycle, PPO mini-batch, max cycles, tests per direction).
        by_num_tests: composed tests -> verdict accuracy measured on the task (section 4.3, Fig. 3 left), if any.
        by_incorrect_fraction: share of incorrect tests -> verdict accuracy (Fig. 3 right), if any.
    """

    column: int
    title: str
    metric: str
    base: float
    table1: dict[str, tuple[float, float]]
    ablations: dict[str, float]
    rlce_schedule: tuple[int, int, int, int]
    by_num_tests: dict[int, float] = field(default_factory=dict)
    by_incorrect_fraction: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Task:
    """One task as every wing sees it.

    Args:
        name: the rows' `task` value.
        metric: a key of [`METRICS`].
        labels: the answer options (closed labels), or `None` for free text.
        display_name: the name in tables and model cards.
        gold: the gold column of the task's evaluation rows (never part of a training row).
        subject: what a question about the task asks about (Video-Zero's questioner, D.5); `None`: "the speaker".
        judge: for `metric: judge_accuracy`, a key of [`JUDGES`] (default: `reference`).
        rubric_question: the rubric judge's one task question (D.3) instead of the row's question; `None`: the row's.
        polarity: label -> negative / neutral / positive, for `binary_weighted_f1`.
        paper: the paper's numbers on the task, if it reports any.
        forms: the task's forms when its prepared data is a folder `<form>/<split>.jsonl` per form, evaluated one
            after the other with their macro average (PrefEval's explicit / choice / persona); `()`: a split is one
            file.
        media: `"video"` for the Human Behavior Atlas tasks, whose splits (`problem`, `answer`, `videos`) are read
            by [`rlce_trl.data.hba`] (`--hba_task`); `None`: text rows.
    """

    name: str
    metric: str
    labels: tuple[str, ...] | None = None
    display_name: str = ""
    gold: str = "gold"
    subject: str | None = None
    judge: str | None = None
    rubric_question: str | None = None
    polarity: dict[str, str] | None = None
    paper: PaperResults | None = None
    forms: tuple[str, ...] = ()
    media: str | None = None

    def __post_init__(self):
        if self.metric == "judge_accuracy" and self.judge is None:
            object.__setattr__(self, "judge", "reference")

    @property
    def free_text(self) -> bool:
        return self.labels is None

    @property
    def needs_judge(self) -> bool:
        return self.metric == "judge_accuracy"


#: The paper's tasks and the numbered-evidence task; user tasks are added by [`load_task`].
TASKS: dict[str, Task] = {}


def register(task: Task) -> None:
    TASKS[task.name] = task


def get_task(name: str) -> Task:
    """The registered task `name` (one line naming the known ones otherwise)."""
    if name not in TASKS:
        raise InputError(f"unknown task {name!r}: use one of {', '.join(TASKS)} or pass your task file (--task).")
    return TASKS[name]


def video_tasks() -> tuple[str, ...]:
    """The names of the Human Behavior Atlas video tasks (`media: video`; the choices of `--hba_task`)."""
    return tuple(name for name, task in TASKS.items() if task.media == "video")


def paper_tasks() -> list[Task]:
    """The tasks the paper reports, in Table 1's column order (each with its `paper` numbers)."""
    return sorted((t for t in TASKS.values() if t.paper is not None), key=lambda t: t.paper.column)


def judge_of(name: str) -> str | None:
    """The judge (a key of [`JUDGES`]) of the registered task `name`; `None` for an unknown or unjudged task."""
    task = TASKS.get(name)
    return task.judge if task is not None else None


def _register_paper_tasks() -> None:
    from .hba import MOSEI_LABELS, MOSEI_POLARITY, URFUNNY_LABELS
    from .prefeval import FORMS as PREFEVAL_FORMS

    # Table 1 (means over three seeds) with Table 6's standard deviations, and Tables 3-4's ablations (one training
    # run each, no spread: the RLCE rows of those tables come from one run, not from Table 1's three-seed mean).
    # Scores are percentages on the test split with each task's metric (Table 5).
    register(Task("prefeval", "judge_accuracy", None, "PrefEval", judge="prefeval_checks", paper=PaperResults(
        3, "PrefEval", "LLM-judge accuracy, macro over explicit / choice / persona", 44.72,
        {"usc": (41.37, 6.16), "policy_judge": (46.73, 5.21), "video_zero": (43.30, 0.83),
         "visplay": (42.55, 1.66), "rar": (56.45, 0.95), "rler": (56.12, 4.26), "rlac": (55.27, 0.71),
         "rlce": (75.38, 3.32)},
        {"rlce_static": 46.57, "rlce_pointwise": 68.51}, (48, 16, 20, 1)), forms=PREFEVAL_FORMS))
    register(Task("mosei", "binary_weighted_f1", MOSEI_LABELS, "CMU-MOSEI sentiment", media="video",
                  subject="the speaker's sentiment", polarity=dict(MOSEI_POLARITY),
                  rubric_question="What is the sentiment of the speaker in this video?",  # D.3 quotes it
                  paper=PaperResults(
                      1, "MOSEI", "binary weighted F1", 64.86,
                      {"usc": (66.84, 1.28), "policy_judge": (67.35, 1.77), "video_zero": (64.80, 0.21),
                       "visplay": (65.00, 0.56), "rar": (65.03, 0.17), "rler": (65.19, 0.33), "rlac": (67.15, 0.03),
                       "rlce": (70.93, 1.13)},
                      {"rlce_static": 69.40}, (320, 32, 45, 3),
                      by_num_tests={1: 0.54, 12: 0.69}, by_incorrect_fraction={"0-20%": 0.96, "20-40%": 0.87})))
    register(Task("urfunny", "weighted_f1", URFUNNY_LABELS, "UR-FUNNY", media="video",
                  subject="whether the speaker is being humorous",
                  rubric_question="Is the punchline of this video humorous?",  # ours (D.3 quotes MOSEI's only)
                  paper=PaperResults(
                      2, "UR-FUNNY", "weighted F1", 63.11,
                      {"usc": (59.86, 1.96), "policy_judge": (60.44, 2.20), "video_zero": (62.91, 0.92),
                       "visplay": (64.96, 0.66), "rar": (64.72, 1.58), "rler": (64.52, 0.04), "rlac": (61.96, 0.40),
                       "rlce": (69.46, 2.21)},
                      {}, (96, 16, 25, 6),
                      by_num_tests={1: 0.56, 12: 0.66}, by_incorrect_fraction={"0-20%": 1.00, "20-40%": 0.86})))
    register(Task("intentqa", "judge_accuracy", None, "IntentQA", judge="reference", media="video", paper=PaperResults(
        0, "IntentQA", "LLM-judge accuracy", 55.25,
        {"usc": (56.77, 0.89), "policy_judge": (57.33, 0.50), "video_zero": (55.06, 0.13),
         "visplay": (55.34, 0.99), "rar": (55.60, 0.03), "rler": (56.31, 0.63), "rlac": (56.75, 0.66),
         "rlce": (58.48, 1.59)},
        {"rlce_pointwise": 56.61}, (96, 16, 40, 1))))
    register(Task("numbered_evidence", "exact_match", None, "numbered evidence"))


_register_paper_tasks()
_BUILT_IN = tuple(TASKS)  # the package's tasks, before any task file or plain rows
_USER_TASKS: set[str] = set()  # the names of the task files loaded (a task file may be loaded again)

_KEYS = ("name", "display_name", "data", "prompt", "prompt_column", "system_prompt", "labels", "gold", "metric",
         "answer_instruction")
_FORMATS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}


@dataclass
class TaskFile:
    """A user's task file, checked ([`load_task`]); [`rows`](#rows) gives a split's rows in the package's format."""

    path: Path
    task: Task
    data: dict[str, str] | str
    prompt: str | None = None
    prompt_column: str | None = None
    system_prompt: str | None = None
    #: the answer instruction every prompt gets (`answer_instruction`, resolved); `None`: none
    answer_instruction: str | None = None

    @property
    def name(self) -> str:
        return self.task.name

    def splits(self) -> list[str]:
        return list(self.data if isinstance(self.data, dict) else self._hub)

    @cached_property
    def _hub(self):
        return load_hub_splits(self.data, what=f"{self.path.name}: data")

    def records(self, split: str) -> list[dict]:
        """The raw records of `split` (one line naming the fix for a missing split or an unreadable file)."""
        if split not in self.splits():
            raise InputError(f"{self.path.name} has no {split!r} split (it has {', '.join(self.splits())}): add it "
                             "under `data:`.")
        if isinstance(self.data, str):
            return list(self._hub[split])
        return read_records(self.path.parent / self.data[split], f"{self.path.name}: the {split} split")

    def rows(self, split: str, with_gold: bool) -> list[dict]:
        """`split` as package rows: `id`, `task`, the conversational `prompt`, `answer_options` for closed labels,
        `answer_instruction` when the task has one (added to the prompt by the pipeline in place of a recipe's
        `prompt_suffix`: `rlce_trl.training.pipeline.policy_rows`), and `gold` only when `with_gold` (evaluation).
        Checked: a non-empty split, the prompt's columns present in every row, the gold column present (and a label,
        for closed labels) when asked for."""
        records = self.records(split)
        where = f"{self.path.name} ({split} split)"
        if not records:
            raise InputError(f"{where} is empty: give it rows, or drop the split.")
        out = []
        for k, record in enumerate(records):
            prompt = self._prompt(record, where, k)
            row = {"id": record.get("id", f"{self.name}-{split}-{k}"), "task": self.name, "prompt": prompt,
                   "question": _last_user_text(prompt)}
            if self.task.labels is not None:
                row["answer_options"] = list(self.task.labels)
            if self.answer_instruction:
                row["answer_instruction"] = self.answer_instruction
            if with_gold:
                gold = record.get(self.task.gold)
                if gold is None:
                    raise InputError(f"{where}: row {k} has no gold column {self.task.gold!r}: add it, or set "
                                     "`gold:` to the column that holds the answer.")
                gold = str(gold)
                if self.task.labels is not None and gold not in self.task.labels:
                    raise InputError(f"{where}: row {k} has gold {gold!r}, not one of the labels "
                                     f"{', '.join(self.task.labels)}: fix the row or the labels.")
                row["gold"] = gold
            out.append(row)
        return out

    def _prompt(self, record: dict, where: str, k: int) -> list[dict]:
        if self.prompt is not None:
            try:
                text = self.prompt.format_map(record)
            except KeyError as error:
                raise InputError(f"{where}: row {k} has no column {error.args[0]!r} that the prompt template names: "
                                 "add it, or fix `prompt:`.") from None
        elif self.prompt_column is not None:
            if record.get(self.prompt_column) is None:
                raise InputError(f"{where}: row {k} has no prompt column {self.prompt_column!r}: add it, or fix "
                                 "`prompt_column:`.")
            text = str(record[self.prompt_column])
        else:
            text = record.get("prompt")
            if not (isinstance(text, str) or isinstance(text, list) and text
                    and all(isinstance(m, dict) and "role" in m for m in text)):
                raise InputError(f"{where}: row {k} has no `prompt` (a string or a list of chat messages): add one, "
                                 "or set `prompt:` (a template over columns) or `prompt_column:`.")
        messages = [{"role": "user", "content": text}] if isinstance(text, str) else [dict(m) for m in text]
        return ([{"role": "system", "content": self.system_prompt}] if self.system_prompt else []) + messages


def _last_user_text(prompt: list[dict]) -> str:
    content = next((m.get("content") for m in reversed(prompt) if m.get("role") == "user"), "")
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return str(content or "")


def plain_rows(rows: list[dict], where: str, judged: bool) -> list[dict]:
    """A user's rows that carry a `gold` column but not the package's `id` / `task`: numbered, a string `prompt`
    made one user message, and scored as the task `rows`: accuracy over their `answer_options` when they have some,
    else the LLM judge's verdicts when `judged`, else exact match of the free text. Rows that do carry `task` are
    returned as they are."""
    if not rows or any("task" in r for r in rows):
        return rows
    labelled = all(r.get("answer_options") for r in rows)
    register(Task("rows", "accuracy" if labelled else "judge_accuracy" if judged else "exact_match", None,
                  f"rows of {where}"))
    out = []
    for k, row in enumerate(rows):
        row = {**row, "task": "rows", "id": row.get("id", k)}
        if isinstance(row.get("prompt"), str):
            row["prompt"] = [{"role": "user", "content": row["prompt"]}]
        if isinstance(row.get("prompt"), list):
            row.setdefault("question", _last_user_text(row["prompt"]))
        out.append(row)
    return out


def read_records(path: str | os.PathLike, what: str = "--dataset_name") -> list[dict]:
    """The records of a local JSON / JSONL / CSV / Parquet file (read with `datasets`); one line naming the file
    when it is missing, of another kind or unreadable."""
    path = Path(path)
    if not path.is_file():
        raise MissingInputError(f"{what} {str(path)!r} does not exist.")
    kind = _FORMATS.get(path.suffix.lower())
    if kind is None:
        raise InputError(f"{what} {path.name}: use a .json, .jsonl, .csv or .parquet file.")
    check_data_file(path, kind, what)  # empty, not UTF-8, bad JSON line, one-column CSV: one line each
    import datasets

    try:
        reader = {"json": datasets.Dataset.from_json, "csv": datasets.Dataset.from_csv,
                  "parquet": datasets.Dataset.from_parquet}[kind]
        return list(reader(str(path)))
    except Exception as error:  # noqa: BLE001 - a file datasets cannot parse is the user's
        raise InputError(f"{what} {path.name} cannot be read ({first_line(error, 200)}).") from None


def load_hub_splits(name: str, config: str | None = None, what: str = "--dataset_name"):
    """A Hub dataset's splits (`datasets.load_dataset`), one line naming the id when it cannot be loaded."""
    import datasets

    try:
        return datasets.load_dataset(name, config)
    except Exception as error:  # noqa: BLE001 - any failure to fetch is the user's id or network
        raise MissingInputError(f"{what}: cannot load the Hub dataset {name!r} ({first_line(error, 200)}): check the "
                                "id (and the network, or the local Hub cache with HF_HUB_OFFLINE=1).") from None


def is_task_file(text: str) -> bool:
    """Whether a `--task` value names a task file (a .yaml / .yml path, or any existing file) rather than a
    registered task."""
    return str(text).lower().endswith((".yaml", ".yml")) or Path(os.path.expanduser(str(text))).is_file()


def looks_like_hub_id(text: str) -> bool:
    return bool(re.fullmatch(r"[\w.-]+/[\w.-]+", text)) and not Path(text).exists()


def load_task(path: str | os.PathLike) -> TaskFile:
    """A user's task file, checked and registered (so that evaluation scores its rows with its metric)."""
    import yaml

    path = Path(os.path.expanduser(os.fspath(path)))
    if not path.is_file():
        how = "" if str(path) not in _BUILT_IN else f" {path} is a built-in task: its recipes train on it, --data" + (
            f" with --hba_task {path}" if TASKS[str(path)].media else "") + " reads its split."
        raise MissingInputError(f"--task {str(path)!r}: no such file: give a task file (YAML; see the README's "
                                "\"Your own task\")." + how)
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise InputError(f"task file {path} is not UTF-8 text (byte {error.start}): save it as UTF-8.") from None
    except yaml.YAMLError as error:
        raise InputError(f"task file {path} is not valid YAML ({' '.join(str(error).split())[:200]}).") from None
    if not isinstance(spec, dict):
        raise InputError(f"task file {path} must be a YAML mapping (name, data, prompt, labels, gold, metric).")
    for key in spec:
        if key not in _KEYS:
            raise InputError(f"{path.name}: unknown key {key!r}{did_you_mean(str(key), _KEYS) or ''}; the keys "
                             f"are {', '.join(_KEYS)}.")
    name = spec.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_]+", name):
        raise InputError(f"{path.name}: `name` must be a task name (letters, digits, _), not {name!r}.")
    if name in TASKS and name not in _USER_TASKS:
        raise InputError(f"{path.name}: `name: {name}` is one of the package's tasks: pick another name.")
    labels = spec.get("labels")
    if labels is not None:
        if not isinstance(labels, list) or len(labels) < 2 or not all(isinstance(x, (str, int)) for x in labels):
            raise InputError(f"{path.name}: `labels` must be a list of two or more answer options (or left out for "
                             "free text).")
        labels = tuple(str(x) for x in labels)
        if len(set(labels)) != len(labels):
            raise InputError(f"{path.name}: `labels` names an option twice: list each once.")
    metric = spec.get("metric") or ("accuracy" if labels else "exact_match")
    if metric not in METRICS:
        raise InputError(f"{path.name}: unknown metric {metric!r}{did_you_mean(str(metric), METRICS)}; use one of "
                         f"{', '.join(METRICS)}.")
    if metric == "binary_weighted_f1":
        raise InputError(f"{path.name}: binary_weighted_f1 is MOSEI's polarity metric: use weighted_f1.")
    if labels and metric not in LABEL_METRICS:
        raise InputError(f"{path.name}: metric {metric} scores free text, but the task has labels: use accuracy or "
                         "weighted_f1, or drop `labels`.")
    if not labels and metric in LABEL_METRICS:
        raise InputError(f"{path.name}: metric {metric} needs `labels` (the answer options): add them, or use "
                         "exact_match or judge_accuracy for free text.")
    gold = spec.get("gold", "gold")
    if not isinstance(gold, str) or not gold:
        raise InputError(f"{path.name}: `gold` must name the gold column.")
    prompt, prompt_column = spec.get("prompt"), spec.get("prompt_column")
    if prompt is not None and prompt_column is not None:
        raise InputError(f"{path.name}: give `prompt` (a template) or `prompt_column`, not both.")
    if prompt is not None:
        if not isinstance(prompt, str) or not prompt.strip():
            raise InputError(f"{path.name}: `prompt` must be a template such as \"Review: {{text}}\".")
        try:
            columns = {f for _, f, _, _ in string.Formatter().parse(prompt) if f is not None}
        except ValueError as error:
            raise InputError(f"{path.name}: `prompt` is not a valid template ({error}); write {{{{ and }}}} for "
                             "literal braces.") from None
        if gold in {c.split(".")[0].split("[")[0] for c in columns}:
            raise InputError(f"{path.name}: the prompt template shows the gold column {gold!r}: the policy would "
                             "train on the answer; remove it from `prompt`.")
    if prompt_column is not None and (not isinstance(prompt_column, str) or prompt_column == gold):
        raise InputError(f"{path.name}: `prompt_column` must name a column other than the gold column {gold!r}.")
    if prompt is None and prompt_column is None and gold == "prompt":
        raise InputError(f"{path.name}: the gold column cannot be `prompt` (the policy reads it).")
    data = spec.get("data")
    if isinstance(data, dict):
        if not data or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            raise InputError(f"{path.name}: `data` maps split names to files (train: train.jsonl, ...).")
        for split, file in data.items():
            if Path(file).suffix.lower() not in _FORMATS:
                raise InputError(f"{path.name}: the {split} split {file!r} is not .json, .jsonl, .csv or .parquet.")
    elif not (isinstance(data, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", data)):
        raise InputError(f"{path.name}: `data` must map splits to local files or be a Hub dataset id (org/name), "
                         f"not {data!r}.")
    system_prompt = spec.get("system_prompt")
    if system_prompt is not None and not isinstance(system_prompt, str):
        raise InputError(f"{path.name}: `system_prompt` must be text.")
    instruction = answer_instruction(spec.get("answer_instruction", "auto"), labels, path.name)
    task = Task(name, metric, labels, str(spec.get("display_name") or name), gold)
    _USER_TASKS.add(name)
    register(task)
    return TaskFile(path, task, data, prompt, prompt_column, system_prompt, instruction)
