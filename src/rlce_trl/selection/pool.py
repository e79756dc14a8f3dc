"""Candidate pools: "sample once, select many" (next-capabilities §0.5, §3.2).

`rlce-trl sample` writes one JSON line per row:
`{id, task, prompt, answer_options, question, num_frames, gold, evidence, videos, greedy, candidates, decoding}`,
where `greedy` and each candidate are `{text, answer, token_logprobs, tail_conf, temperature, top_p, top_k, seed}`.
On video rows the prompt's video blocks keep the clip reference and frame metadata
(`{"type": "video", "source": {...}, "metadata": {...}}`, no pixels) and `num_frames` is the clip's sampled frame
count T, so `rlce-trl select` decodes the same frames again for a verifier (`Request.media`) and Elect's frame terms.
Every selector of `rlce-trl select` reads the same pool. Answers are re-extracted from the text when a pool is read
(Elect's `<answer>` tag, else RLCE's `\\boxed{}` / label extraction), so a pool written by other code works too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..data.jsonl import append_jsonl, read_json, read_jsonl_lenient, repair_jsonl_tail, write_json
from ..elect.parsing import ElectParse, parse_elect_output, tail_confidence
from ..errors import InputError, MissingInputError, first_line
from ..evidence.answers import match_label, normalize_answer

POOL_FILE = "pool.jsonl"
SETTINGS_FILE = "sample_settings.json"


@dataclass
class PoolCandidate:
    text: str
    answer: str | None
    parse: ElectParse
    confidence: float | None
    meta: dict = field(default_factory=dict)


@dataclass
class PoolRow:
    id: str
    prompt: list[dict] | str
    candidates: list[PoolCandidate]
    greedy: PoolCandidate | None = None
    labels: tuple[str, ...] | None = None
    gold: str | None = None
    evidence: list[int] | None = None
    num_frames: int | None = None
    question: str | None = None
    task: str = ""

    def is_correct(self, answer: str | None) -> bool | None:
        """Exact match after canonicalization; `None` when the row has no gold."""
        if self.gold is None:
            return None
        if answer is None:
            return False
        if self.labels:
            return match_label(answer, self.labels) == match_label(self.gold, self.labels)
        return normalize_answer(answer) == normalize_answer(self.gold)


def parse_candidate(record: dict, labels, num_frames, tail_fraction: float = 0.25) -> PoolCandidate:
    text = record.get("text") or ""
    parse = parse_elect_output(text, num_frames, labels)
    conf = record.get("tail_conf")
    if conf is None:
        conf = tail_confidence(record.get("token_logprobs"), tail_fraction)
    meta = {k: v for k, v in record.items() if k not in ("text", "answer", "token_logprobs", "tail_conf")}
    return PoolCandidate(text, parse.answer, parse, conf, meta)


def _bad_fields(record: dict) -> list[str]:
    """Fields of a pool or input row that no selector could use (named in the row's one-line problem)."""
    bad = []
    options = record.get("answer_options")
    if options is not None and not (isinstance(options, list) and all(isinstance(o, str) for o in options)):
        bad.append("answer_options (a list of strings)")
    frames = record.get("num_frames")
    if frames is not None and (isinstance(frames, bool) or not isinstance(frames, int) or frames < 1):
        bad.append("num_frames (a positive integer)")
    evidence = record.get("evidence")
    if evidence is not None and not (isinstance(evidence, list) and all(type(e) is int for e in evidence)):
        bad.append("evidence (a list of integers)")
    if isinstance(record.get("gold"), (dict, list)):
        bad.append("gold (a string)")
    prompt = record.get("prompt")
    if prompt is not None and not isinstance(prompt, str) and not (
            isinstance(prompt, list) and all(isinstance(m, dict) and "role" in m and "content" in m for m in prompt)):
        bad.append("prompt (a string or a list of {role, content} messages)")
    candidates = [c for c in [record.get("greedy"), *(record.get("candidates") or [])] if isinstance(c, dict)]
    if any(not isinstance(c.get("text", ""), str) for c in candidates):
        bad.append("candidate text (a string)")
    if any(not _numbers(c.get("token_logprobs")) for c in candidates):
        bad.append("token_logprobs (a list of numbers)")
    return bad


def _numbers(values) -> bool:
    return values is None or (isinstance(values, list) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in values))


def row_from_record(record: dict, tail_fraction: float = 0.25) -> PoolRow:
    """A [`PoolRow`] from one pool line; raises `ValueError` naming the missing field."""
    missing = [k for k in ("id", "prompt", "candidates") if k not in record]
    if missing or not isinstance(record.get("candidates"), list):
        raise ValueError(f"pool row {record.get('id', '?')}: missing or malformed {missing or ['candidates']}")
    bad = _bad_fields(record)
    if bad:
        raise ValueError(f"pool row {record.get('id', '?')}: malformed {', '.join(bad)}")
    labels = tuple(record.get("answer_options") or ()) or None
    frames = record.get("num_frames")  # a positive integer or None (`_bad_fields`)
    greedy = record.get("greedy")
    return PoolRow(
        id=str(record["id"]), prompt=record["prompt"],
        candidates=[parse_candidate(c if isinstance(c, dict) else {"text": str(c)}, labels, frames, tail_fraction)
                    for c in record["candidates"]],
        greedy=parse_candidate(greedy, labels, frames, tail_fraction) if isinstance(greedy, dict) else None,
        labels=labels, gold=None if record.get("gold") is None else str(record["gold"]),
        evidence=record.get("evidence"), num_frames=frames, question=record.get("question"),
        task=record.get("task", ""))


def read_pool(path: str | os.PathLike, tail_fraction: float = 0.25) -> tuple[list[PoolRow], list[str]]:
    """Rows of a pool file (or a folder holding `pool.jsonl`) and one message per line that could not be read."""
    path = Path(path)
    if path.is_dir():
        path = path / POOL_FILE
    if not path.exists():
        raise MissingInputError(f"No pool at {path}: write one with `rlce-trl sample --output_dir DIR`.")
    if not path.is_file():
        raise MissingInputError(f"--pool {path} is not a file: pass the folder `rlce-trl sample` wrote, or its "
                                f"{POOL_FILE}.")
    rows, problems, seen = [], [], set()
    with path.open("rb") as f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                row = row_from_record(json.loads(raw.decode("utf-8")), tail_fraction)
                problem = f"row {row.id} again (the first one is kept)" if row.id in seen else None
            except UnicodeDecodeError:
                problem = "not UTF-8 text"
            except (ValueError, TypeError, AttributeError) as error:
                problem = first_line(error, 200)
            if problem:
                problems.append(f"{path.name}:{number}: {problem}")
                continue
            seen.add(row.id)
            rows.append(row)
    return rows, problems


# -- sampling ---------------------------------------------------------------------------------------------------------
def input_row_problem(row) -> str | None:
    """Why `sample_pool` would skip an input row (no id, no prompt, a field no selector could use), or `None`."""
    if not isinstance(row, dict):
        return f"not a JSON object ({type(row).__name__})"
    missing = [k for k in ("id", "prompt") if k not in row or (k == "prompt" and not row.get("prompt"))]
    if missing:
        return f"no {' or '.join(f'`{k}`' for k in missing)}"
    bad = _bad_fields(row)
    return f"bad {', '.join(bad)}" if bad else None


def candidate_record(sampled, spec, labels, num_frames, tail_fraction: float = 0.25) -> dict:
    parse = parse_elect_output(sampled.text, num_frames, labels)
    logprobs = [round(x, 5) for x in sampled.token_logprobs]
    return {"text": sampled.text, "answer": parse.answer, "token_logprobs": logprobs,
            "tail_conf": tail_confidence(sampled.token_logprobs, tail_fraction), "temperature": spec.temperature,
            "top_p": spec.top_p, "top_k": spec.top_k, "seed": spec.seed}


def reference_prompt(prompt):
    """The prompt as a pool stores it: video blocks keep their `source` reference and `metadata`, not the pixels."""
    from ..data.media import map_video_blocks

    return map_video_blocks(prompt, lambda block: {k: v for k, v in block.items() if k != "video"})


def check_resume_settings(path: Path, settings: dict, made: str) -> None:
    """Refuse to resume into `path`'s folder when its settings file `path` records other settings than `settings` (the
    rerun would mix two runs in one file) or cannot be read; nothing to check when there is no such file. `made`
    names what the folder holds (`"a pool sampled"`)."""
    if not path.exists():
        return
    previous = read_json(path)
    if previous is None:
        raise InputError(f"{path} is unreadable: restore it, or use another --output_dir.")
    if previous != settings:
        changed = sorted(k for k in set(previous) | set(settings) if previous.get(k) != settings.get(k))
        raise InputError(f"{path.parent} holds {made} with other settings ({', '.join(changed)}): use another "
                         "--output_dir, or the same settings to resume.")


def sample_pool(rows: Sequence[dict], sampler: Callable, output_dir: str | os.PathLike, *, n: int,
                temperature: float = 1.0, top_p: float = 0.95, top_k: int = 20, seed: int = 0,
                greedy_too: bool = True, batch_size: int = 4, settings_extra: dict | None = None,
                expand: Callable[[dict], dict] | None = None, log: Callable[[str], None] = print,
                schedule: list | None = None) -> dict:
    """Sample `n` candidates (plus the greedy answer) per row into `output_dir/pool.jsonl`, appending row by row, so a
    rerun of the same command resumes. `sampler(prompts, specs) -> [[Sampled]]` (a generator's `.sample`). Rows
    without an id or a prompt are counted and skipped. `expand(row) -> row` puts the frames of a video row's clips
    into its prompt (`rlce_trl.data.hba.expand_videos`); a row whose clip cannot be decoded (`ValueError`, `OSError`)
    is counted and left for a rerun. `schedule`: per candidate a (Sampling, Perturbation) pair (Elect's Eq. 13,
    `rlce_trl.selection.diversify.eq13_schedule`) that replaces the single temperature; each candidate record then
    names its perturbation (video rows). Returns counts."""
    from ..elect.rewards import frames_in_prompt
    from ..generation.sampling import Sampling

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    settings = {"n": n, "temperature": temperature, "top_p": top_p, "top_k": top_k, "seed": seed,
                "greedy_too": greedy_too, **(settings_extra or {})}
    settings_path = out / SETTINGS_FILE
    check_resume_settings(settings_path, settings, "a pool sampled")
    write_json(settings, settings_path)
    pool_path = out / POOL_FILE
    repair_jsonl_tail(pool_path)  # a line cut by an interruption: that row is sampled again
    done = {str(r["id"]) for r in read_jsonl_lenient(pool_path)[0] if "id" in r} if pool_path.exists() else set()
    valid = [input_row_problem(r) is None for r in rows]
    skipped = valid.count(False)
    todo = [r for r, ok in zip(rows, valid, strict=True) if ok and str(r["id"]) not in done]
    specs = ([Sampling(temperature=0.0, seed=seed)] if greedy_too else []) + [
        Sampling(temperature=temperature, top_p=top_p, top_k=top_k, seed=seed + 1 + k) for k in range(n)]
    if schedule is not None:
        from ..data.media import video_blocks
        from .diversify import sample_diversified

        specs = [spec for spec, _ in schedule]
    unreadable = 0
    for start in range(0, len(todo), batch_size):
        batch = []
        for row in todo[start : start + batch_size]:
            if expand is not None and row.get("videos"):
                try:
                    row = expand(row)
                except (ValueError, OSError) as error:
                    unreadable += 1
                    log(f"row {row['id']}: skipped, {first_line(error)}")
                    continue
                row = {**row, "num_frames": row.get("num_frames") or frames_in_prompt(row["prompt"])}
            batch.append(row)
        prompts = [[{"role": "user", "content": r["prompt"]}] if isinstance(r["prompt"], str) else r["prompt"]
                   for r in batch]
        if batch and schedule is not None:
            sampled = sample_diversified(sampler, prompts, schedule)
        else:
            sampled = sampler(prompts, specs) if batch else []
        for row, outs in zip(batch, sampled, strict=True):
            labels = row.get("answer_options") or None
            frames = row.get("num_frames")
            records = [candidate_record(s, spec, labels, frames) for s, spec in zip(outs, specs, strict=True)]
            if schedule is not None:  # which perturbation each candidate saw (None: the clip as it is, or text)
                video = bool(video_blocks(row["prompt"]))
                for record, (_, xi) in zip(records, schedule, strict=True):
                    record["perturbation"] = asdict(xi) if video and not xi.identity else None
            keep = {k: row.get(k) for k in ("task", "prompt", "answer_options", "question", "num_frames", "gold",
                                            "evidence", "videos") if k in row}
            keep["prompt"] = reference_prompt(row["prompt"])
            line = {"id": str(row["id"]), **keep, "greedy": records[0] if greedy_too else None,
                    "candidates": records[1:] if greedy_too else records, "decoding": settings}
            append_jsonl([line], pool_path)
        log(f"sampled {min(start + batch_size, len(todo))}/{len(todo)} rows")
    return {"rows": len(rows), "sampled": len(todo) - unreadable, "resumed": len(done), "skipped_malformed": skipped,
            "skipped_unreadable_clip": unreadable}
