"""LLM judges of the free-text tasks, through any OpenAI-compatible chat-completions endpoint.

- **IntentQA** (HBA's protocol): the judge sees the question, the reference answer and the prediction and returns JSON
  `{"correct": true|false, "explanation": "..."}`; a reply that does not parse is asked again, up to four attempts,
  and a row still unjudged counts as incorrect.
- **PrefEval** (Zhao et al., 2025): the four checks of the checkout's `error_type/` prompts (acknowledge,
  hallucination, violation, helpful), combined into PrefEval's four error types; a row is correct when it has none.
  The hallucination check runs only when the acknowledgement check says yes *and* quotes a non-empty preference.

PrefEval's own scoring tests `"yes" in answer` on whatever it parsed, so a judge reply that fails to parse makes a row
count as correct. Here a check whose reply does not parse after `max_attempts` is a *parse failure*: the row is
counted in `parse_failures` and scored incorrect (`accuracy`); `accuracy_prefeval_rule` gives PrefEval's lenient
number next to it for comparison.

The API key is read from the environment variable named by `api_key_env` at each request and is never stored on the
client, logged or written to any file. Only the standard library is used (no `openai` dependency).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path


class JudgeError(RuntimeError):
    """The endpoint could not be reached or answered with an error."""


@dataclass
class OpenAIJudgeClient:
    """A minimal chat-completions client for an OpenAI-compatible server (`vllm serve`, a hosted API).

    Args:
        base_url: the API root, e.g. `http://127.0.0.1:8000/v1`.
        model: the model name the server expects.
        api_key_env: name of the environment variable holding the key; no key is sent when it is unset (local vLLM).
        temperature: judges decode greedily by default.
        max_tokens: cap on each judge reply.
        timeout: seconds per HTTP request.
        concurrency: requests in flight at once.
    """

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_tokens: int = 512
    timeout: float = 120.0
    concurrency: int = 8

    def complete(self, messages: list[dict[str, str]]) -> str:
        """One chat completion; raises [`JudgeError`] on a network or HTTP error."""
        body = json.dumps(
            {
                "model": self.model,
                "messages": messages,
                "temperature": self.temperature,
                "max_tokens": self.max_tokens,
            }
        ).encode()
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(
            self.base_url.rstrip("/") + "/chat/completions", data=body, headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.loads(response.read().decode())
        except urllib.error.HTTPError as error:  # the key is in the request headers only, never in this message
            raise JudgeError(f"judge endpoint returned HTTP {error.code}: {error.read()[:200]!r}") from None
        except (urllib.error.URLError, TimeoutError, OSError, json.JSONDecodeError) as error:
            raise JudgeError(f"judge endpoint {self.base_url} failed: {error}") from None
        try:
            return payload["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise JudgeError(f"unexpected judge reply: {str(payload)[:200]}") from None

    def map(self, fn, items: Sequence) -> list:
        """`[fn(item) for item in items]`, `concurrency` at a time, in order."""
        if self.concurrency <= 1 or len(items) <= 1:
            return [fn(item) for item in items]
        with ThreadPoolExecutor(self.concurrency) as pool:
            return list(pool.map(fn, items))


def ask_until_parsed(client, messages: list[dict], parse, max_attempts: int = 4, retry_wait: float = 0.0):
    """Ask up to `max_attempts` times until `parse(reply)` is not `None`. Returns `(parsed, last_reply, attempts,
    error)`; `parsed` is `None` when every attempt failed to parse or to reach the endpoint."""
    reply, error = "", None
    for attempt in range(1, max_attempts + 1):
        try:
            reply = client.complete(messages)
            error = None
        except JudgeError as e:
            error = str(e)
            if retry_wait:
                time.sleep(retry_wait * attempt)
            continue
        parsed = parse(reply)
        if parsed is not None:
            return parsed, reply, attempt, None
    return None, reply, max_attempts, error


# ------------------------------------------------------------------------------------------------------- IntentQA

REPLY_CHARS = 500  # judge replies kept in predictions.jsonl, so a parse failure can be read, not just counted
INTENTQA_JUDGE_SYSTEM = "You are a strict and fair grader of answers to questions about videos."
INTENTQA_JUDGE_TEMPLATE = (
    "Question about a video:\n{question}\n\n"
    "Reference answer:\n{reference}\n\n"
    "Predicted answer:\n{prediction}\n\n"
    "Is the predicted answer correct, that is, does it give the same intent or reason as the reference answer? "
    "Wording may differ; the meaning must match.\n"
    'Reply with JSON only: {{"correct": true or false, "explanation": "one short sentence"}}'
)


def intentqa_messages(question: str, reference: str, prediction: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": INTENTQA_JUDGE_SYSTEM},
        {
            "role": "user",
            "content": INTENTQA_JUDGE_TEMPLATE.format(question=question, reference=reference, prediction=prediction),
        },
    ]


def parse_json_verdict(text: str) -> dict | None:
    """`{"correct": bool, "explanation": str}` from a reply holding one JSON object (code fences and text around it
    are tolerated); `None` when there is no object with a boolean-like `correct`."""
    if not text:
        return None
    candidates = re.findall(r"\{.*\}", text, flags=re.DOTALL)
    for candidate in candidates + re.findall(r"\{[^{}]*\}", text):
        try:
            obj = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict) or "correct" not in obj:
            continue
        value = obj["correct"]
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no"):
            value = value.strip().lower() in ("true", "yes")
        if isinstance(value, bool):
            return {"correct": value, "explanation": str(obj.get("explanation", ""))}
    return None


def judge_intentqa(client, items: Sequence[dict], max_attempts: int = 4) -> list[dict]:
    """Judge IntentQA predictions. Each item has `question`, `gold` and `prediction` (`None` = no valid answer,
    scored incorrect with no call). Returns per item `correct` (`True`/`False`, or `None` when unjudged after
    `max_attempts`), `explanation`, `attempts`, `judge_error`."""

    def one(item: dict) -> dict:
        if not item.get("prediction"):
            return {"correct": False, "explanation": "no answer extracted", "attempts": 0, "judge_error": None}
        messages = intentqa_messages(item["question"], item["gold"], item["prediction"])
        parsed, reply, attempts, error = ask_until_parsed(client, messages, parse_json_verdict, max_attempts)
        if parsed is None:
            return {
                "correct": None,
                "explanation": reply[:REPLY_CHARS],
                "attempts": attempts,
                "judge_error": error or "unparsed",
            }
        return {**parsed, "attempts": attempts, "judge_error": None}

    return client.map(one, list(items))


# -------------------------------------------------------------------------------------------------------- PrefEval

PREFEVAL_CHECKS = {
    "acknowledge": "check_acknowledge.txt",
    "hallucination": "check_hallucination.txt",
    "violation": "check_violation.txt",
    "helpful": "check_helpful.txt",
}
PREFEVAL_ERROR_TYPES = (
    "unhelpful",
    "preference_unaware_violation",
    "hallucinated_preference_violation",
    "inconsistent",
)


def load_prefeval_judge_prompts(prefeval_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """The four check prompts of the checkout's `error_type/` folder (read, never copied into this package)."""
    root = Path(prefeval_dir or os.environ.get("PREFEVAL_DIR") or "")
    folder = root / "error_type"
    missing = [name for name in PREFEVAL_CHECKS.values() if not (folder / name).is_file()]
    if not str(root) or missing:
        raise FileNotFoundError(
            f"PrefEval judge prompts not found in {str(folder)!r} (missing {', '.join(missing)}). Clone "
            "https://github.com/amazon-science/PrefEval and pass its path as --prefeval_dir or in PREFEVAL_DIR."
        )
    return {check: (folder / name).read_text(encoding="utf-8") for check, name in PREFEVAL_CHECKS.items()}


def fill(template: str, **values: str) -> str:
    """Fill `{name}` slots by plain replacement: the templates hold other braces and brackets that `str.format`
    would trip on."""
    for name, value in values.items():
        template = template.replace("{" + name + "}", value)
    return template


def xml_tag(text: str, tag: str) -> str | None:
    """Content of the last `<tag>...</tag>` in `text`, stripped; `None` when absent."""
    found = re.findall(rf"<{tag}>(.*?)</{tag}>", text or "", flags=re.DOTALL | re.IGNORECASE)
    return found[-1].strip() if found else None


def yes_no(text: str | None) -> str | None:
    """`"yes"` / `"no"` from an `<answer>` value such as `Yes`, `[No]`, `yes.`; `None` for anything else."""
    if text is None:
        return None
    word = re.sub(r"[^a-z]", " ", text.lower()).split()
    return word[0] if word and word[0] in ("yes", "no") else None


def parse_check(check: str, reply: str) -> dict | None:
    """Parsed reply of one check: `{"answer": "yes"|"no"}` plus `quote` for acknowledge; `None` if unparsed."""
    answer = yes_no(xml_tag(reply, "answer"))
    if answer is None:
        return None
    if check == "acknowledge":
        quote = xml_tag(reply, "preference") or ""
        return {"answer": answer, "quote": quote.strip("[] \n\"'")}
    return {"answer": answer}


def prefeval_check_messages(
    check: str, prompts: dict[str, str], question: str, preference: str, response: str, restatement: str = ""
) -> list[dict[str, str]]:
    text = fill(
        prompts[check],
        question=question,
        end_generation=response,
        preference=preference,
        assistant_restatement=restatement,
    )
    return [{"role": "user", "content": text}]


def prefeval_error_types(acknowledge: bool, hallucination: bool, violation: bool, helpful: bool) -> dict[str, bool]:
    """PrefEval's error types from the four check outcomes; `correct` when none applies."""
    hallucination = acknowledge and hallucination
    unhelpful = not helpful
    types = {
        "unhelpful": unhelpful,
        "preference_unaware_violation": not acknowledge and violation and not unhelpful,
        "hallucinated_preference_violation": acknowledge and hallucination and violation and not unhelpful,
        "inconsistent": acknowledge and not hallucination and violation and not unhelpful,
    }
    return {**types, "correct": not any(types.values())}


def judge_prefeval(client, items: Sequence[dict], prompts: dict[str, str], max_attempts: int = 4) -> list[dict]:
    """Judge PrefEval responses. Each item has `question`, `gold` (the preference) and `prediction` (the response
    text given to the judge; `None` or empty = no answer, scored incorrect with no call).

    Returns per item the check outcomes (`acknowledge`, `hallucination`, `violation`, `helpful`: `"yes"`, `"no"`,
    `None` = unparsed, or `"skipped"` for a hallucination check that does not apply), the acknowledged `quote`, the
    four error types, the judge's last reply per check (`<check>_reply`, cut to `REPLY_CHARS`), `parse_failure`,
    `correct` (strict: a parse failure is incorrect) and `correct_prefeval_rule`
    (PrefEval's own lenient scoring, where an unparsed check counts as neither yes nor no).
    """
    items = list(items)
    results: list[dict] = [{} for _ in items]
    lock = threading.Lock()

    def run(job: tuple[int, str]) -> None:
        index, check = job
        item = results[index]
        source = items[index]
        messages = prefeval_check_messages(
            check, prompts, source["question"], source["gold"], source["prediction"], item.get("quote", "")
        )
        parsed, reply, attempts, error = ask_until_parsed(
            client, messages, lambda reply: parse_check(check, reply), max_attempts
        )
        with lock:  # checks of one row finish on different threads
            item[check] = parsed["answer"] if parsed else None
            item[f"{check}_attempts"] = attempts
            item[f"{check}_reply"] = reply[:REPLY_CHARS]  # the judge's explanation; for a parse failure, the reason
            if error:
                item.setdefault("judge_errors", []).append(f"{check}: {error}")
            if check == "acknowledge":
                item["quote"] = parsed["quote"] if parsed else ""

    answered = [i for i, item in enumerate(items) if (item.get("prediction") or "").strip()]
    client.map(run, [(i, check) for i in answered for check in ("acknowledge", "violation", "helpful")])
    needs_hallucination = [i for i in answered if results[i].get("acknowledge") == "yes" and results[i].get("quote")]
    client.map(run, [(i, "hallucination") for i in needs_hallucination])

    for i, item in enumerate(results):
        if i not in answered:
            item.update(
                {
                    "acknowledge": None,
                    "violation": None,
                    "helpful": None,
                    "hallucination": "skipped",
                    "quote": "",
                    "parse_failure": False,
                    "no_answer": True,
                    **{t: False for t in PREFEVAL_ERROR_TYPES},
                    "correct": False,
                    "correct_prefeval_rule": False,
                }
            )
            continue
        item.setdefault("hallucination", "skipped")
        required = ["acknowledge", "violation", "helpful"] + (["hallucination"] if i in needs_hallucination else [])
        item["parse_failure"] = any(item[c] is None for c in required)
        # PrefEval's rule: `"yes" in answer` / `"no" in answer` on the parsed text ("" when unparsed)
        lenient = prefeval_error_types(
            acknowledge=item["acknowledge"] == "yes",
            hallucination=item["hallucination"] == "yes",
            violation=item["violation"] == "yes",
            helpful=item["helpful"] != "no",
        )
        item.update({t: lenient[t] for t in PREFEVAL_ERROR_TYPES})
        item["correct_prefeval_rule"] = lenient["correct"]
        item["correct"] = lenient["correct"] and not item["parse_failure"]
    return results


def summarize_prefeval(results: Sequence[dict]) -> dict:
    """Accuracy (strict), PrefEval-rule accuracy, parse failures and the rate of each error type and check."""
    n = len(results)
    if not n:
        return {"num_rows": 0}
    summary = {
        "num_rows": n,
        "accuracy": sum(r["correct"] is True for r in results) / n,
        "accuracy_prefeval_rule": sum(r["correct_prefeval_rule"] is True for r in results) / n,
        "parse_failures": sum(bool(r.get("parse_failure")) for r in results),
        "no_answer": sum(bool(r.get("no_answer")) for r in results),
    }
    for error_type in PREFEVAL_ERROR_TYPES:
        summary[f"error_{error_type}"] = sum(bool(r.get(error_type)) for r in results) / n
    for check in ("acknowledge", "violation", "hallucination"):
        summary[f"rate_{check}"] = sum(r.get(check) == "yes" for r in results) / n
    summary["rate_helpful"] = sum(r.get("helpful") == "yes" for r in results) / n
    return summary
