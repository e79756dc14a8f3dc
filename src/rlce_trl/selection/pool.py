"""Candidate pools: "sample once, select many" (next-capabilities §0.5, §3.2).

`rlce-trl sample` writes one JSON line per row:
`{id, task, prompt, answer_options, question, num_frames, gold, evidence, greedy, candidates, decoding}`, where
`greedy` and each candidate are `{text, answer, token_logprobs, tail_conf, temperature, top_p, top_k, seed}`.
Every selector of `rlce-trl select` reads the same pool. Answers are re-extracted from the text when a pool is read
(Elect's `<answer>` tag, else RLCE's `\\boxed{}` / label extraction), so a pool written by other code works too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..data.jsonl import read_jsonl_lenient, repair_jsonl_tail
from ..elect.parsing import ElectParse, parse_elect_output, tail_confidence
from ..errors import MissingInputError
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


def row_from_record(record: dict, tail_fraction: float = 0.25) -> PoolRow:
    """A [`PoolRow`] from one pool line; raises `ValueError` naming the missing field."""
    missing = [k for k in ("id", "prompt", "candidates") if k not in record]
    if missing or not isinstance(record.get("candidates"), list):
        raise ValueError(f"pool row {record.get('id', '?')}: missing or malformed {missing or ['candidates']}")
    labels = tuple(record.get("answer_options") or ()) or None
    frames = record.get("num_frames")
    frames = int(frames) if frames is not None else None
    greedy = record.get("greedy")
    return PoolRow(
        id=str(record["id"]), prompt=record["prompt"],
        candidates=[parse_candidate(c if isinstance(c, dict) else {"text": str(c)}, labels, frames, tail_fraction)
                    for c in record["candidates"]],
        greedy=parse_candidate(greedy, labels, frames, tail_fraction) if isinstance(greedy, dict) else None,
        labels=labels, gold=record.get("gold"), evidence=record.get("evidence"), num_frames=frames,
        question=record.get("question"), task=record.get("task", ""),
    )


def read_pool(path: str | os.PathLike, tail_fraction: float = 0.25) -> tuple[list[PoolRow], list[str]]:
    """Rows of a pool file (or a folder holding `pool.jsonl`) and one message per line that could not be read."""
    path = Path(path)
    if path.is_dir():
        path = path / POOL_FILE
    if not path.exists():
        raise MissingInputError(f"No pool at {path}: write one with `rlce-trl sample --output_dir DIR`.")
    rows, problems = [], []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(row_from_record(json.loads(line), tail_fraction))
            except (ValueError, TypeError, AttributeError) as error:
                problems.append(f"{path.name}:{number}: {error}")
    return rows, problems


# -- sampling ---------------------------------------------------------------------------------------------------------
def candidate_record(sampled, spec, labels, num_frames, tail_fraction: float = 0.25) -> dict:
    parse = parse_elect_output(sampled.text, num_frames, labels)
    logprobs = [round(x, 5) for x in sampled.token_logprobs]
    return {"text": sampled.text, "answer": parse.answer, "token_logprobs": logprobs,
            "tail_conf": tail_confidence(sampled.token_logprobs, tail_fraction), "temperature": spec.temperature,
            "top_p": spec.top_p, "top_k": spec.top_k, "seed": spec.seed}


def sample_pool(rows: Sequence[dict], sampler: Callable, output_dir: str | os.PathLike, *, n: int,
                temperature: float = 1.0, top_p: float = 0.95, top_k: int = 20, seed: int = 0,
                greedy_too: bool = True, batch_size: int = 4, settings_extra: dict | None = None,
                log: Callable[[str], None] = print) -> dict:
    """Sample `n` candidates (plus the greedy answer) per row into `output_dir/pool.jsonl`, appending row by row, so a
    rerun of the same command resumes. `sampler(prompts, specs) -> [[Sampled]]` (a generator's `.sample`). Rows
    without an id or a prompt are counted and skipped. Returns counts."""
    from ..evaluation.generation import SampleSpec

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    settings = {"n": n, "temperature": temperature, "top_p": top_p, "top_k": top_k, "seed": seed,
                "greedy_too": greedy_too, **(settings_extra or {})}
    settings_path = out / SETTINGS_FILE
    if settings_path.exists():
        previous = json.loads(settings_path.read_text())
        if previous != settings:
            changed = sorted(k for k in set(previous) | set(settings) if previous.get(k) != settings.get(k))
            raise ValueError(f"{out} holds a pool sampled with other settings ({', '.join(changed)}): use another "
                             "--output_dir, or the same settings to resume.")
    settings_path.write_text(json.dumps(settings, indent=2))
    pool_path = out / POOL_FILE
    repair_jsonl_tail(pool_path)  # a line cut by an interruption: that row is sampled again
    done = {str(r["id"]) for r in read_jsonl_lenient(pool_path)[0] if "id" in r} if pool_path.exists() else set()
    valid = [isinstance(r, dict) and "id" in r and bool(r.get("prompt")) for r in rows]
    skipped = valid.count(False)
    todo = [r for r, ok in zip(rows, valid) if ok and str(r["id"]) not in done]
    specs = ([SampleSpec(0.0, 1.0, 0, seed)] if greedy_too else []) + [
        SampleSpec(temperature, top_p, top_k, seed + 1 + k) for k in range(n)]
    with pool_path.open("a", encoding="utf-8") as f:
        for start in range(0, len(todo), batch_size):
            batch = todo[start : start + batch_size]
            sampled = sampler([r["prompt"] for r in batch], specs)
            for row, outs in zip(batch, sampled):
                labels = row.get("answer_options") or None
                frames = row.get("num_frames")
                records = [candidate_record(s, spec, labels, frames) for s, spec in zip(outs, specs)]
                keep = {k: row.get(k) for k in ("task", "prompt", "answer_options", "question", "num_frames", "gold",
                                                "evidence") if k in row}
                line = {"id": str(row["id"]), **keep, "greedy": records[0] if greedy_too else None,
                        "candidates": records[1:] if greedy_too else records, "decoding": settings}
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
                f.flush()
            log(f"sampled {min(start + batch_size, len(todo))}/{len(todo)} rows")
    return {"rows": len(rows), "sampled": len(todo), "resumed": len(done), "skipped_malformed": skipped}
