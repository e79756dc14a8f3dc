"""PrefEval (Zhao et al., 2025) as GRPO-ready rows: the three preference forms, padding, and the shared split.

Built exactly as described in appendix A of the paper (see `docs/method.md`, "Data and evaluation"):

- **explicit**: the preference as a user turn, then a fixed acknowledgement as the assistant turn;
- **choice**: four turns from `query`, `assistant_options`, `user_selection`, `assistant_acknowledgment`;
- **persona**: the benchmark's persona conversation (keys `"0"` .. `"N-1"`, each a user and an assistant turn);

then 5-10 padding turn pairs sampled per example with a fixed seed from `filtered_inter_turns.json` (pairs whose user
and assistant text together hold 60-1,200 characters), as many as fit under a 13,000-character cap on the whole
conversation, then the question as the last user turn.

Rows are aligned by index across the three forms within a topic, so the 70/10/20 split is decided once per
preference-question pair (stratified within each topic) and shared by the three forms: 701 / 100 / 199 rows per form.

PrefEval is CC BY-NC 4.0: nothing of it is shipped here. Point `prefeval_dir` (or the `PREFEVAL_DIR` environment
variable) at a local checkout of https://github.com/amazon-science/PrefEval.

This module imports neither torch nor datasets: it produces plain dicts (see [`to_dataset`] in `rlce_trl.data`).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Iterable
from itertools import pairwise
from pathlib import Path

from ..errors import InputError, MissingInputError
from .jsonl import write_jsonl
from .prompts import SOLVER_SYSTEM_PROMPT

FORMS = ("explicit", "choice", "persona")
SPLITS = ("train", "validation", "test")
TASK = "prefeval"
#: The `--dataset_name` value that builds PrefEval's rows from a checkout (`train_prefeval`).
DATASET_NAME = "prefeval"

#: Where each form lives inside `benchmark_dataset/`.
FORM_DIRS = {
    "explicit": "explicit_preference",
    "choice": "implicit_preference/choice-based",
    "persona": "implicit_preference/persona-driven",
}
PADDING_FILE = "filtered_inter_turns.json"

#: Our own wording of the assistant's acknowledgement after an explicit preference (the paper fixes one sentence but
#: does not print it).
EXPLICIT_ACKNOWLEDGEMENT = "Thank you for telling me. I will keep your preference in mind."

DEFAULT_SEED = 42
MIN_PADDING_PAIRS, MAX_PADDING_PAIRS = 5, 10
MIN_PAIR_CHARS, MAX_PAIR_CHARS = 60, 1200
MAX_CONVERSATION_CHARS = 13_000
SPLIT_FRACTIONS = {"validation": 0.1, "test": 0.2}  # train is the rest, 0.7

_HOW_TO_GET = (
    "Clone the benchmark with `git clone https://github.com/amazon-science/PrefEval` and pass the clone's path "
    "(the folder holding `benchmark_dataset/` and `error_type/`) as --prefeval_dir or in PREFEVAL_DIR."
)


def resolve_prefeval_dir(prefeval_dir: str | os.PathLike | None = None) -> Path:
    """The PrefEval checkout to read: `prefeval_dir`, else `$PREFEVAL_DIR`. Raises a `FileNotFoundError` that says how
    to get one when the path is missing or is not a PrefEval checkout."""
    prefeval_dir = os.environ.get("PREFEVAL_DIR") if prefeval_dir is None else prefeval_dir
    if not prefeval_dir:
        raise MissingInputError(f"No PrefEval checkout given. {_HOW_TO_GET}")
    root = Path(prefeval_dir).expanduser()
    expected = [f"benchmark_dataset/{d}" for d in FORM_DIRS.values()] + [f"benchmark_dataset/{PADDING_FILE}"]
    missing = [p for p in expected if not (root / p).exists()]
    if missing:
        raise MissingInputError(f"{str(root)!r} is not a PrefEval checkout (missing {', '.join(missing)}). "
                                f"{_HOW_TO_GET}")
    return root


def read_json(path: Path) -> list:
    """A JSON file of the checkout, parsed; a file that is not UTF-8, not JSON or not a list raises [`InputError`]
    naming it and the fix."""
    fix = "restore it from the PrefEval repository (`git checkout -- .` in the checkout, or clone it again)"
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise InputError(f"{path} is not UTF-8 text (byte {error.start}): {fix}.") from None
    except json.JSONDecodeError as error:
        raise InputError(f"{path} is not valid JSON (line {error.lineno}: {error.msg}): {fix}.") from None
    except OSError as error:
        raise InputError(f"cannot read {path} ({error.strerror or error}): {fix}.") from None
    if not isinstance(value, list):
        raise InputError(f"{path} holds a JSON {type(value).__name__}, expected a list: {fix}.")
    return value


def load_records(prefeval_dir: str | os.PathLike | None, form: str) -> dict[str, list[dict]]:
    """The raw benchmark records of one form, by topic (the file stems of the explicit form, e.g.
    `travel_restaurant`, sorted), in file order (the order that aligns the forms)."""
    if form not in FORMS:
        raise ValueError(f"Unknown PrefEval form {form!r}; choose one of {FORMS}.")
    root = resolve_prefeval_dir(prefeval_dir)
    explicit = root / "benchmark_dataset" / FORM_DIRS["explicit"]
    topics = sorted(p.stem for p in explicit.glob("*.json"))
    if not topics:
        raise MissingInputError(f"{explicit} holds no topic files (*.json): the checkout is incomplete. {_HOW_TO_GET}")
    folder = root / "benchmark_dataset" / FORM_DIRS[form]
    records = {}
    for topic in topics:
        path = folder / f"{topic}.json"
        if not path.exists():
            raise MissingInputError(f"{path} is missing: the {form} form must have a file for every topic. "
                                    f"{_HOW_TO_GET}")
        records[topic] = read_json(path)
    return records


def padding_pool(prefeval_dir: str | os.PathLike | None = None) -> list[tuple[str, str]]:
    """Consecutive (user, assistant) turn pairs of `filtered_inter_turns.json` whose two texts together hold
    `MIN_PAIR_CHARS`..`MAX_PAIR_CHARS` characters (111 pairs on the released file)."""
    path = resolve_prefeval_dir(prefeval_dir) / "benchmark_dataset" / PADDING_FILE
    conversations = read_json(path)
    try:
        return padding_pairs_from_conversations(c["conversation"] for c in conversations)
    except (KeyError, TypeError, AttributeError) as error:
        raise InputError(f"{path} does not have PrefEval's layout ({type(error).__name__}: {error}): restore it "
                         "from the PrefEval repository.") from None


def padding_pairs_from_conversations(conversations: Iterable[list[dict]]) -> list[tuple[str, str]]:
    """Every user turn directly answered by an assistant turn, kept when the pair's length is within bounds."""
    pool = []
    for messages in conversations:
        for first, second in pairwise(messages):
            if first["role"] == "user" and second["role"] == "assistant":
                user, assistant = first["content"].strip(), second["content"].strip()
                if MIN_PAIR_CHARS <= len(user) + len(assistant) <= MAX_PAIR_CHARS:
                    pool.append((user, assistant))
    return pool


def preference_turns(form: str, record: dict) -> list[dict[str, str]]:
    """The turns through which `form` expresses the preference (before padding and question)."""
    if form == "explicit":
        return [{"role": "user", "content": record["preference"].strip()},
                {"role": "assistant", "content": EXPLICIT_ACKNOWLEDGEMENT}]
    conversation = record["conversation"]
    if form == "choice":
        return [{"role": "user", "content": conversation["query"].strip()},
                {"role": "assistant", "content": conversation["assistant_options"].strip()},
                {"role": "user", "content": conversation["user_selection"].strip()},
                {"role": "assistant", "content": conversation["assistant_acknowledgment"].strip()}]
    if form == "persona":
        return [{"role": role, "content": conversation[key][role].strip()}  # "0".."N-1"; int order: "10" follows "9"
                for key in sorted(conversation, key=int) for role in ("user", "assistant")]
    raise ValueError(f"Unknown PrefEval form {form!r}; choose one of {FORMS}.")


def sample_padding(pool: list[tuple[str, str]], seed: int, topic: str, index: int) -> list[tuple[str, str]]:
    """5-10 distinct padding pairs for one preference-question pair, from its own seeded generator.

    The generator depends on (seed, topic, index) only, so the three forms of a pair draw the same padding and a row
    never changes when other rows are added or removed. (A string seed is hashed with SHA-512 by `random`, so this is
    stable across processes, unlike `hash()`.)
    """
    rng = random.Random(f"prefeval-padding:{seed}:{topic}:{index}")
    k = rng.randint(MIN_PADDING_PAIRS, MAX_PADDING_PAIRS)
    return rng.sample(pool, min(k, len(pool)))


def build_conversation(form: str, record: dict, padding: list[tuple[str, str]],
                       max_chars: int = MAX_CONVERSATION_CHARS) -> list[dict[str, str]]:
    """Preference turns, then the padding pairs that fit under `max_chars`, then the question.

    The cap drops padding pairs from the end; the preference turns and the question are never cut (two persona
    conversations exceed the cap on their own and get no padding).
    """
    head = preference_turns(form, record)
    question = {"role": "user", "content": record["question"].strip()}
    budget = max_chars - sum(len(m["content"]) for m in head) - len(question["content"])
    middle = []
    for user, assistant in padding:
        if len(user) + len(assistant) > budget:
            break
        middle += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        budget -= len(user) + len(assistant)
    return head + middle + [question]


def split_assignments(topic_sizes: dict[str, int], seed: int = DEFAULT_SEED) -> dict[str, list[str]]:
    """For each topic, the split of every row index: a seeded shuffle, then `round(0.1 n)` validation and
    `round(0.2 n)` test rows, the rest train. One decision per preference-question pair, shared by the three forms.

    On PrefEval's 20 topics (1,000 pairs) this gives 701 / 100 / 199.
    """
    assignments = {}
    for topic, n in topic_sizes.items():
        order = list(range(n))
        random.Random(f"prefeval-split:{seed}:{topic}").shuffle(order)
        n_val = round(n * SPLIT_FRACTIONS["validation"])
        n_test = round(n * SPLIT_FRACTIONS["test"])
        split_of = ["train"] * n
        for index in order[:n_val]:
            split_of[index] = "validation"
        for index in order[n_val:n_val + n_test]:
            split_of[index] = "test"
        assignments[topic] = split_of
    return assignments


def make_row(form: str, topic: str, index: int, record: dict, conversation: list[dict], split: str) -> dict:
    """One GRPO-ready row. Only validation and test rows carry `gold` (the preference sentence): TRL hands every
    dataset column to the reward functions, so train rows must not have it at all."""
    row = {"id": f"prefeval/{form}/{topic}/{index}", "task": TASK, "form": form, "topic": topic,
           "prompt": [{"role": "system", "content": SOLVER_SYSTEM_PROMPT}, *conversation], "answer_options": [],
           "question": record["question"].strip()}
    if split != "train":
        row["gold"] = record["preference"].strip()
    return row


def build_prefeval(prefeval_dir: str | os.PathLike | None = None, forms: Iterable[str] = FORMS,
                   seed: int = DEFAULT_SEED) -> dict[str, dict[str, list[dict]]]:
    """Build every requested form and split: `{form: {split: [row, ...]}}`.

    Args:
        prefeval_dir: a PrefEval checkout; defaults to `$PREFEVAL_DIR`.
        forms: any of `"explicit"`, `"choice"`, `"persona"`.
        seed: seeds the padding draw of every pair and the per-topic split shuffle.
    """
    root = resolve_prefeval_dir(prefeval_dir)
    forms = list(forms)
    pool = padding_pool(root)
    records = {form: load_records(root, form) for form in forms}
    sizes = {topic: len(rows) for topic, rows in records[forms[0]].items()}
    for form in forms[1:]:  # the split is shared, so the forms must be aligned row for row
        if {topic: len(rows) for topic, rows in records[form].items()} != sizes:
            raise InputError(f"PrefEval forms {forms[0]!r} and {form!r} have different rows per topic: the checkout "
                             "is incomplete or modified; restore it from the PrefEval repository.")
    assignments = split_assignments(sizes, seed)
    out = {form: {split: [] for split in SPLITS} for form in forms}
    for form in forms:
        for topic, rows in records[form].items():
            for index, record in enumerate(rows):
                padding = sample_padding(pool, seed, topic, index)
                split = assignments[topic][index]
                try:
                    conversation = build_conversation(form, record, padding)
                    out[form][split].append(make_row(form, topic, index, record, conversation, split))
                except (KeyError, TypeError, AttributeError) as error:  # a record without PrefEval's fields
                    raise InputError(f"{FORM_DIRS[form]}/{topic}.json record {index} does not have PrefEval's fields "
                                     f"({type(error).__name__}: {error}): restore the file from the PrefEval "
                                     "repository.") from None
    return out


def prepare_prefeval(prefeval_dir: str | os.PathLike | None, output_dir: str | os.PathLike,
                     seed: int = DEFAULT_SEED) -> dict[str, dict[str, int]]:
    """Write `output_dir/{form}/{split}.jsonl` for the three forms and return the row counts.

    All or nothing: the output folder is checked first (a file, or not writable: [`InputError`]), every split is
    built in memory and written to a temporary folder inside it, and only then moved into place."""
    prefeval_dir = resolve_prefeval_dir(prefeval_dir)  # a missing checkout is named before anything is written
    output_dir = Path(output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise InputError(f"--output_dir {str(output_dir)!r} is a file: pass a folder.")
    created = not output_dir.exists()
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        staging = output_dir / f".prepare-{os.getpid()}"
        staging.mkdir(exist_ok=True)
    except OSError as error:
        raise InputError(f"cannot write to --output_dir {str(output_dir)!r} ({error.strerror or error}): pass a "
                         "writable folder.") from None
    try:
        built = build_prefeval(prefeval_dir, seed=seed)
        counts = {form: {split: write_jsonl(rows, staging / form / f"{split}.jsonl") for split, rows in splits.items()}
                  for form, splits in built.items()}
        for form in built:
            target = output_dir / form
            if target.is_dir():
                shutil.rmtree(target)
            os.replace(staging / form, target)
    except OSError as error:
        raise InputError(f"cannot write to --output_dir {str(output_dir)!r} ({error.strerror or error}): pass a "
                         "writable folder with free space.") from None
    except InputError:  # a bad checkout: nothing is left behind
        if created:
            shutil.rmtree(output_dir, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return counts
