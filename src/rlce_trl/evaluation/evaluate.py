"""`rlce-trl evaluate`: the paper's evaluation protocol (appendix A) for one checkpoint on one split.

Greedy decoding (temperature 0, one response per row, 512 new tokens by default) with vLLM when it is installed and
transformers otherwise; answer extraction with the paper's fallbacks; the task metric (judges for free text). Every
finished row is appended to `predictions.jsonl` and `summary.json` is rewritten after each batch, so an interrupted
run loses at most the batch in flight and the same command resumes where it stopped. Given the folder written by
`rlce-trl prepare-prefeval`, the three forms are evaluated one after the other and their macro average reported.

Only the standard library is imported at module level: torch, transformers and vLLM are imported by the backend that
is used.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from ..data.jsonl import read_jsonl
from .metrics import TASK_METRIC_NAMES, extract_prediction, macro_average, task_score

PREFEVAL_FORMS = ("explicit", "choice", "persona")
Generator = Callable[[Sequence[list[dict]]], list[str]]


# ------------------------------------------------------------------------------------------------------- backends


class TransformersGenerator:
    """Greedy batched generation with a transformers causal LM (left padding, chat template, thinking disabled).

    Build it from a checkpoint path ([`TransformersGenerator.from_pretrained`]) or around a model being trained
    ([`TransformersGenerator`] with `model` and `tokenizer`, as the checkpoint-selection callback does).
    """

    def __init__(self, model, tokenizer, max_new_tokens: int = 512, batch_size: int = 8):
        self.model, self.tokenizer = model, tokenizer
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size

    @classmethod
    def from_pretrained(cls, path: str, max_new_tokens: int = 512, batch_size: int = 8, dtype: str = "auto"):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path)
        if dtype == "auto":
            dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        if torch.cuda.is_available():
            model = model.to("cuda")
        return cls(model.eval(), tokenizer, max_new_tokens, batch_size)

    def _render(self, messages: list[dict]) -> str:
        try:  # Qwen3-style templates read `enable_thinking`; others ignore the extra variable
            return self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True, enable_thinking=False
            )
        except TypeError:
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def __call__(self, prompts: Sequence[list[dict]]) -> list[str]:
        import torch

        tokenizer = self.tokenizer
        side, tokenizer.padding_side = tokenizer.padding_side, "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        texts, device = [self._render(list(p)) for p in prompts], next(self.model.parameters()).device
        outputs = []
        was_training = self.model.training
        self.model.eval()
        try:
            for start in range(0, len(texts), self.batch_size):
                batch = tokenizer(
                    texts[start : start + self.batch_size], return_tensors="pt", padding=True, add_special_tokens=False
                ).to(device)
                with torch.no_grad():
                    generated = self.model.generate(
                        **batch,
                        max_new_tokens=self.max_new_tokens,
                        do_sample=False,
                        pad_token_id=tokenizer.pad_token_id,
                    )
                new_tokens = generated[:, batch["input_ids"].shape[1] :]
                outputs += tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
        finally:
            tokenizer.padding_side = side
            self.model.train(was_training)
        return outputs


class VLLMGenerator:
    """Greedy generation with an in-process `vllm.LLM` (temperature 0, no top-k, no penalties)."""

    def __init__(self, path: str, max_new_tokens: int = 512, max_model_len: int | None = None, **engine_kwargs):
        from vllm import LLM, SamplingParams

        self.llm = LLM(model=path, max_model_len=max_model_len, **engine_kwargs)
        self.params = SamplingParams(temperature=0.0, max_tokens=max_new_tokens, n=1)

    def __call__(self, prompts: Sequence[list[dict]]) -> list[str]:
        outputs = self.llm.chat(
            [list(p) for p in prompts],
            self.params,
            use_tqdm=False,
            chat_template_kwargs={"enable_thinking": False},
        )
        return [o.outputs[0].text for o in outputs]


def vllm_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def make_generator(path: str, backend: str = "auto", max_new_tokens: int = 512, batch_size: int = 8) -> Generator:
    """vLLM when `backend="vllm"`, or `"auto"` and vLLM is installed; transformers otherwise."""
    if backend == "vllm" or (backend == "auto" and vllm_available()):
        return VLLMGenerator(path, max_new_tokens=max_new_tokens)
    if backend not in ("auto", "transformers"):
        raise ValueError(f"Unknown backend {backend!r}; choose auto, vllm or transformers.")
    return TransformersGenerator.from_pretrained(path, max_new_tokens=max_new_tokens, batch_size=batch_size)


# --------------------------------------------------------------------------------------------------------- judging


class Judge:
    """Scores free-text rows: IntentQA with the JSON-verdict judge, PrefEval with the four `error_type/` checks."""

    def __init__(self, client, prefeval_prompts: dict[str, str] | None = None, max_attempts: int = 4):
        self.client, self.prefeval_prompts, self.max_attempts = client, prefeval_prompts, max_attempts

    def __call__(self, task: str, records: list[dict]) -> list[dict]:
        from .judges import judge_intentqa, judge_prefeval, load_prefeval_judge_prompts

        if task == "intentqa":
            return judge_intentqa(self.client, records, self.max_attempts)
        if task == "prefeval":
            if self.prefeval_prompts is None:
                self.prefeval_prompts = load_prefeval_judge_prompts()
            return judge_prefeval(self.client, records, self.prefeval_prompts, self.max_attempts)
        raise ValueError(f"No judge for task {task!r}.")


# ------------------------------------------------------------------------------------------------------ the loop


def _atomic_write_json(obj: dict, path: Path) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)  # readers never see a half-written summary


def _read_done(path: Path) -> dict[str, dict]:
    """Rows already in `predictions.jsonl`; a last line cut by an interruption is dropped (it will be redone)."""
    done = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            done[record["id"]] = record
    return done


def summarize(task: str, rows: Sequence[dict], records: Sequence[dict]) -> dict:
    """The summary of one split: metric and score over the finished rows, progress, extraction and judge counts."""
    summary = {
        "task": task,
        "metric": TASK_METRIC_NAMES.get(task),
        "num_rows": len(rows),
        "num_done": len(records),
        "complete": len(records) == len(rows),
        "no_valid_answer": sum(r.get("prediction") is None for r in records),
    }
    if not any(r.get("answer_options") for r in rows):  # free text
        unjudged = sum(r.get("correct") is None for r in records)
        summary["unjudged"] = unjudged
        if records and unjudged == len(records):
            summary["score"] = None
            summary["note"] = "no judge verdicts: pass --judge_base_url and --judge_model to score free text"
            return summary
    summary["score"] = task_score(task, records) if records else None
    if task == "prefeval" and records:
        from .judges import summarize_prefeval

        judged = [r for r in records if "correct_prefeval_rule" in r]
        summary.update({k: v for k, v in summarize_prefeval(judged).items() if k != "num_rows"} if judged else {})
    return summary


def evaluate_rows(
    rows: Sequence[dict],
    generate: Generator,
    output_dir: str | os.PathLike,
    judge: Callable[[str, list[dict]], list[dict]] | None = None,
    batch_size: int = 8,
    progress: bool = True,
    description: str = "evaluate",
) -> dict:
    """Evaluate rows (each with `id`, `task`, `prompt`, `answer_options`, `gold`) and write
    `output_dir/predictions.jsonl` and `output_dir/summary.json` as it goes. Rows already in `predictions.jsonl`
    are not generated again. Returns the summary."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    predictions_path, summary_path = output_dir / "predictions.jsonl", output_dir / "summary.json"
    if not rows:
        raise ValueError("No rows to evaluate.")
    if any("gold" not in r for r in rows):
        raise ValueError("Rows without `gold`: evaluate a validation or test split (train rows carry no gold label).")
    tasks = {r["task"] for r in rows}
    if len(tasks) != 1:
        raise ValueError(f"One task per evaluation run, got {sorted(tasks)}.")
    task = tasks.pop()
    free_text = not any(r.get("answer_options") for r in rows)
    if any(r.get("videos") for r in rows):
        raise NotImplementedError(
            "Video rows (HBA) need a vision-language generation backend, which `evaluate` does not have yet; "
            "expand frames with rlce_trl.data.hba.expand_videos and generate with your processor."
        )

    done = _read_done(predictions_path)
    ids = {r["id"] for r in rows}
    records = [done[i] for i in (r["id"] for r in rows) if i in done]
    todo = [r for r in rows if r["id"] not in done]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(rows), initial=len(records), desc=description, unit="row")
    _atomic_write_json(summarize(task, rows, records), summary_path)
    with predictions_path.open("a", encoding="utf-8") as sink:
        for start in range(0, len(todo), batch_size):
            batch = todo[start : start + batch_size]
            responses = generate([r["prompt"] for r in batch])
            new = []
            for row, response in zip(batch, responses):
                new.append(
                    {
                        "id": row["id"],
                        "task": task,
                        **{k: row[k] for k in ("form", "topic") if k in row},
                        "question": row.get("question", ""),
                        "gold": row["gold"],
                        "response": response,
                        "prediction": extract_prediction(response, row.get("answer_options") or []),
                    }
                )
            if free_text:  # the judge decides
                verdicts = judge(task, new) if judge is not None else [{"correct": None} for _ in new]
                for record, verdict in zip(new, verdicts):
                    record.update(verdict)
            for record in new:
                sink.write(json.dumps(record, ensure_ascii=False) + "\n")
            sink.flush()
            os.fsync(sink.fileno())
            records += new
            _atomic_write_json(summarize(task, rows, records), summary_path)
            if bar is not None:
                bar.update(len(batch))
    if bar is not None:
        bar.close()
    stale = set(done) - ids
    summary = summarize(task, rows, [r for r in records if r["id"] in ids])
    if stale:
        summary["ignored_rows_from_other_data"] = len(stale)
    _atomic_write_json(summary, summary_path)
    return summary


def evaluate_prefeval_forms(
    data_dir: str | os.PathLike, split: str, generate: Generator, output_dir: str | os.PathLike, **kwargs
) -> dict:
    """Evaluate `data_dir/{form}/{split}.jsonl` for the three forms and write the macro average to
    `output_dir/summary.json` (per-form outputs in `output_dir/{form}/`)."""
    output_dir = Path(output_dir)
    per_form = {}
    for form in PREFEVAL_FORMS:
        rows = read_jsonl(Path(data_dir) / form / f"{split}.jsonl")
        per_form[form] = evaluate_rows(rows, generate, output_dir / form, description=f"prefeval {form}", **kwargs)
    scores = [s["score"] for s in per_form.values()]
    summary = {
        "task": "prefeval",
        "split": split,
        "prefeval_macro": macro_average(scores) if all(s is not None for s in scores) else None,
        "complete": all(s["complete"] for s in per_form.values()),
        "forms": per_form,
    }
    _atomic_write_json(summary, output_dir / "summary.json")
    return summary


# ---------------------------------------------------------------------------------------------------------- CLI


def add_evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model_name_or_path", required=True, help="Checkpoint to evaluate (a local folder).")
    parser.add_argument(
        "--data",
        required=True,
        help="A split as JSONL (GRPO-ready rows with `gold`), the folder written by `rlce-trl prepare-prefeval` "
        "(all three forms, macro average), or `sample` for the bundled preference sample's test split.",
    )
    parser.add_argument("--split", default="test", help="Split to read from a prepare-prefeval folder.")
    parser.add_argument("--output_dir", required=True, help="Where predictions.jsonl and summary.json go.")
    parser.add_argument("--backend", default="auto", choices=["auto", "vllm", "transformers"])
    parser.add_argument("--max_new_tokens", type=int, default=512)
    parser.add_argument("--batch_size", type=int, default=8, help="Rows per generation call (and per write).")
    parser.add_argument("--limit", type=int, default=None, help="Evaluate only the first N rows (smoke tests).")
    parser.add_argument("--judge_base_url", default=None, help="OpenAI-compatible judge endpoint, e.g. .../v1.")
    parser.add_argument("--judge_model", default=None, help="Model name at the judge endpoint.")
    parser.add_argument(
        "--judge_api_key_env", default="OPENAI_API_KEY", help="Environment variable holding the judge's API key."
    )
    parser.add_argument("--judge_concurrency", type=int, default=8)
    parser.add_argument("--prefeval_dir", default=None, help="PrefEval checkout for the judge prompts.")
    parser.add_argument("--no_progress", action="store_true", help="Hide the progress bar.")


def main_evaluate(args: argparse.Namespace, generator: Generator | None = None) -> int:
    from .judges import OpenAIJudgeClient, load_prefeval_judge_prompts

    judge = None
    if args.judge_base_url:
        if not args.judge_model:
            print("error: --judge_model is required with --judge_base_url", file=sys.stderr)
            return 2
        client = OpenAIJudgeClient(
            args.judge_base_url,
            args.judge_model,
            api_key_env=args.judge_api_key_env,
            concurrency=args.judge_concurrency,
        )
        prompts = None
        if args.prefeval_dir or os.environ.get("PREFEVAL_DIR"):
            prompts = load_prefeval_judge_prompts(args.prefeval_dir)
        judge = Judge(client, prompts)
    generate = generator or make_generator(
        args.model_name_or_path, args.backend, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size
    )
    kwargs = {"judge": judge, "batch_size": args.batch_size, "progress": not args.no_progress}
    data = Path(args.data)
    if args.data == "sample":
        from ..data.sample import load_preference_sample

        rows = load_preference_sample("test")[: args.limit]
        summary = evaluate_rows(rows, generate, args.output_dir, **kwargs)
    elif data.is_dir():
        if not all((data / form / f"{args.split}.jsonl").exists() for form in PREFEVAL_FORMS):
            print(
                f"error: {data} has no <form>/{args.split}.jsonl; run `rlce-trl prepare-prefeval` first",
                file=sys.stderr,
            )
            return 2
        if args.limit is not None:
            print("error: --limit applies to a single JSONL split, not to a PrefEval folder", file=sys.stderr)
            return 2
        summary = evaluate_prefeval_forms(data, args.split, generate, args.output_dir, **kwargs)
    else:
        rows = read_jsonl(data)[: args.limit]
        summary = evaluate_rows(rows, generate, args.output_dir, **kwargs)
    print(json.dumps({k: v for k, v in summary.items() if k != "forms"}, indent=2))
    if "forms" in summary:
        for form, s in summary["forms"].items():
            print(f"{form:<10} {s['score']}")
    return 0
