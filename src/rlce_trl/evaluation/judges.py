"""LLM judges of the free-text tasks, through any OpenAI-compatible chat-completions endpoint.

- **reference** (IntentQA, HBA's protocol; a user's free-text task): the judge sees the question, the reference
  answer and the prediction and returns JSON `{"correct": true|false, "explanation": "..."}`; a reply that does not
  parse is asked again, up to four attempts, and a row still unjudged counts as incorrect.
- **prefeval_checks** (PrefEval, Zhao et al., 2025): the four checks of the checkout's `error_type/` prompts
  (acknowledge, hallucination, violation, helpful), combined into PrefEval's four error types; a row is correct when it
  has none.
  The hallucination check runs only when the acknowledgement check says yes *and* quotes a non-empty preference.

PrefEval's own scoring tests `"yes" in answer` on whatever it parsed, so a judge reply that fails to parse makes a row
count as correct. Here a check whose reply does not parse after `max_attempts` is a *parse failure*: the row is
counted in `parse_failures` and scored incorrect (`accuracy`); `accuracy_prefeval_rule` gives PrefEval's lenient
number next to it for comparison.

A judge that cannot be reached (or keeps failing with 5xx, past its retries and deadline) gives **no verdict**: the
row gets `judge_failed: true` and `correct: None`, and `rlce-trl evaluate` judges it again on the next run.

Requests go through the package's one OpenAI-compatible client ([`~rlce_trl.verifiers.openai_http.OpenAIHTTPClient`]:
overall deadline per request, reply-size cap, retries with backoff). The API key is read from the environment
variable named by `api_key_env` at each request and is never stored on the client, logged or written to any file;
error messages name the endpoint without credentials.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MissingInputError
from ..evidence.answers import tag_content
from ..verifiers.openai_http import HTTPRequestError, OpenAIHTTPClient


def judge_url_problem(base_url: str | None) -> str | None:
    """What is wrong with a judge endpoint's `--judge_base_url` (`None`: nothing, or none was given)."""
    if base_url and not base_url.startswith(("http://", "https://")):
        return "--judge_base_url must start with http:// or https:// (e.g. http://127.0.0.1:8000/v1)"
    return None


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
        timeout: longest wait for any one read of a request, seconds.
        concurrency: requests in flight at once.
        deadline: overall deadline of one judge request, retries and the whole reply included, seconds.
        max_reply_bytes: largest reply accepted.
        max_retries: retries of a request after a connect error, timeout, 429 or 5xx (with backoff).
    """

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_tokens: int = 512
    timeout: float = 120.0
    concurrency: int = 8
    deadline: float = 300.0
    max_reply_bytes: int = 1_000_000
    max_retries: int = 2
    backoff: float = 0.5
    _http: OpenAIHTTPClient = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        self._http = OpenAIHTTPClient(
            timeout_s=self.timeout, connect_timeout_s=min(10.0, self.timeout), deadline_s=self.deadline,
            max_reply_bytes=self.max_reply_bytes, max_retries=self.max_retries, backoff_s=self.backoff,
            max_backoff_s=max(self.backoff, 10.0), api_key_env=self.api_key_env,
            max_connections=max(self.concurrency, 1))

    def complete(self, messages: list[dict[str, str]]) -> str:
        """One chat completion (retried on transport errors, within `deadline`); raises [`JudgeError`] when the
        endpoint cannot give one."""
        body = {"model": self.model, "messages": messages, "temperature": self.temperature,
                "max_tokens": self.max_tokens}
        try:
            payload = self._http.post_with_retries(self.base_url.rstrip("/") + "/chat/completions", body)
        except HTTPRequestError as error:  # scrubbed: the endpoint without credentials, the key never
            raise JudgeError(f"judge endpoint failed: {error}") from None
        try:
            content = payload["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise JudgeError(f"unexpected judge reply: {json.dumps(payload)[:200]}") from None
        if not isinstance(content, str):
            raise JudgeError(f"unexpected judge reply content: {type(content).__name__}")
        return content

    def close(self) -> None:
        self._http.close()

    def map(self, fn, items: Sequence) -> list:
        """`[fn(item) for item in items]`, `concurrency` at a time, in order."""
        if self.concurrency <= 1 or len(items) <= 1:
            return [fn(item) for item in items]
        with ThreadPoolExecutor(self.concurrency) as pool:
            return list(pool.map(fn, items))


def ask_until_parsed(client, messages: list[dict], parse, max_attempts: int = 4):
    """Ask up to `max_attempts` times until `parse(reply)` is not `None`. Returns `(parsed, last_reply, attempts,
    error)`; `parsed` is `None` when every attempt failed to parse, or when the endpoint failed (`error` set: the
    client has already retried it, so asking again would only repeat the failure)."""
    reply = ""
    for attempt in range(1, max_attempts + 1):
        try:
            reply = client.complete(messages)
        except JudgeError as e:
            return None, reply, attempt, str(e)
        parsed = parse(reply)
        if parsed is not None:
            return parsed, reply, attempt, None
    return None, reply, max_attempts, None


# --------------------------------------------------------------- the reference judge (IntentQA, user tasks)

REPLY_CHARS = 500  # judge replies kept in predictions.jsonl, so a parse failure can be read, not just counted
REFERENCE_JUDGE_SYSTEM = "You are a strict and fair grader of answers to questions about videos."
REFERENCE_JUDGE_TEMPLATE = (
    "Question about a video:\n{question}\n\n"
    "Reference answer:\n{reference}\n\n"
    "Predicted answer:\n{prediction}\n\n"
    "Is the predicted answer correct, that is, does it give the same intent or reason as the reference answer? "
    "Wording may differ; the meaning must match.\n"
    'Reply with JSON only: {{"correct": true or false, "explanation": "one short sentence"}}'
)


def parse_json_verdict(text: str) -> dict | None:
    """`{"correct": bool, "explanation": str}` from a reply holding one JSON object (code fences and text around it
    are tolerated); `None` when there is no object with a boolean-like `correct`."""
    if not text:
        return None
    for candidate in re.findall(r"\{.*\}", text, flags=re.DOTALL) + re.findall(r"\{[^{}]*\}", text):
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


def judge_against_reference(client, items: Sequence[dict], max_attempts: int = 4) -> list[dict]:
    """The `reference` judge (IntentQA's, and a user task's with `metric: judge_accuracy`). Each item has `question`,
    `gold` and `prediction` (`None` = no valid answer, scored incorrect with no call). Returns per item `correct`
    (`True`/`False`, or `None` when unjudged after `max_attempts`), `explanation`, `attempts`, `judge_error` and
    `judge_failed` (the endpoint failed: no verdict, to be judged again)."""

    def one(item: dict) -> dict:
        if not item.get("prediction"):
            return {"correct": False, "explanation": "no answer extracted", "attempts": 0, "judge_error": None,
                    "judge_failed": False}
        text = REFERENCE_JUDGE_TEMPLATE.format(question=item["question"], reference=item["gold"],
                                               prediction=item["prediction"])
        messages = [{"role": "system", "content": REFERENCE_JUDGE_SYSTEM}, {"role": "user", "content": text}]
        parsed, reply, attempts, error = ask_until_parsed(client, messages, parse_json_verdict, max_attempts)
        if parsed is None:
            return {"correct": None, "explanation": reply[:REPLY_CHARS], "attempts": attempts,
                    "judge_error": error or "unparsed", "judge_failed": error is not None}
        return {**parsed, "attempts": attempts, "judge_error": None, "judge_failed": False}

    return client.map(one, list(items))


# -------------------------------------------------------------------------------------------------------- PrefEval

PREFEVAL_CHECKS = {check: f"check_{check}.txt" for check in ("acknowledge", "hallucination", "violation", "helpful")}
PREFEVAL_ERROR_TYPES = ("unhelpful", "preference_unaware_violation", "hallucinated_preference_violation",
                        "inconsistent")


def load_prefeval_judge_prompts(prefeval_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """The four check prompts of the checkout's `error_type/` folder (read, never copied into this package)."""
    root = Path(prefeval_dir or os.environ.get("PREFEVAL_DIR") or "")
    folder = root / "error_type"
    missing = [name for name in PREFEVAL_CHECKS.values() if not (folder / name).is_file()]
    if not str(root) or missing:
        raise MissingInputError(
            f"PrefEval judge prompts not found in {str(folder)!r} (missing {', '.join(missing)}). Clone "
            "https://github.com/amazon-science/PrefEval and pass its path as --prefeval_dir or in PREFEVAL_DIR.")
    return {check: (folder / name).read_text(encoding="utf-8") for check, name in PREFEVAL_CHECKS.items()}


def yes_no(text: str | None) -> str | None:
    """`"yes"` / `"no"` from an `<answer>` value such as `Yes`, `[No]`, `yes.`; `None` for anything else."""
    word = re.sub(r"[^a-z]", " ", (text or "").lower()).split()
    return word[0] if word and word[0] in ("yes", "no") else None


def parse_check(check: str, reply: str) -> dict | None:
    """Parsed reply of one check: `{"answer": "yes"|"no"}` plus `quote` for acknowledge; `None` if unparsed."""
    answer = yes_no(tag_content(reply, "answer"))
    if answer is None:
        return None
    if check == "acknowledge":
        return {"answer": answer, "quote": (tag_content(reply, "preference") or "").strip("[] \n\"'")}
    return {"answer": answer}


def prefeval_check_messages(check: str, prompts: dict[str, str], question: str, preference: str, response: str,
                            restatement: str = "") -> list[dict[str, str]]:
    """The check's prompt with its `{name}` slots filled by plain replacement: the templates hold other braces and
    brackets that `str.format` would trip on."""
    text = prompts[check]
    for name, value in dict(question=question, end_generation=response, preference=preference,
                            assistant_restatement=restatement).items():
        text = text.replace("{" + name + "}", value)
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
    `correct` (strict) and `correct_prefeval_rule` (PrefEval's lenient rule; see above)."""
    items = list(items)
    results: list[dict] = [{} for _ in items]
    lock = threading.Lock()

    def run(job: tuple[int, str]) -> None:
        index, check = job
        item = results[index]
        source = items[index]
        messages = prefeval_check_messages(check, prompts, source["question"], source["gold"], source["prediction"],
                                           item.get("quote", ""))
        parsed, reply, attempts, error = ask_until_parsed(client, messages, lambda reply: parse_check(check, reply),
                                                          max_attempts)
        with lock:  # checks of one row finish on different threads
            item[check] = parsed["answer"] if parsed else None
            item[f"{check}_attempts"] = attempts
            item[f"{check}_reply"] = reply[:REPLY_CHARS]  # the judge's explanation; for a parse failure, the reason
            if error:
                item.setdefault("judge_errors", []).append(f"{check}: {error}")
                item["judge_failed"] = True
            if check == "acknowledge":
                item["quote"] = parsed["quote"] if parsed else ""

    answered = [i for i, item in enumerate(items) if (item.get("prediction") or "").strip()]
    client.map(run, [(i, check) for i in answered for check in ("acknowledge", "violation", "helpful")])
    needs_hallucination = [i for i in answered if results[i].get("acknowledge") == "yes" and results[i].get("quote")]
    client.map(run, [(i, "hallucination") for i in needs_hallucination])

    for i, item in enumerate(results):
        if i not in answered:
            item.update({"acknowledge": None, "violation": None, "helpful": None, "hallucination": "skipped",
                         "quote": "", "parse_failure": False, "no_answer": True, "judge_failed": False,
                         **{t: False for t in PREFEVAL_ERROR_TYPES}, "correct": False, "correct_prefeval_rule": False})
            continue
        item.setdefault("hallucination", "skipped")
        required = ["acknowledge", "violation", "helpful"] + (["hallucination"] if i in needs_hallucination else [])
        item["parse_failure"] = any(item[c] is None for c in required)
        # PrefEval's rule: `"yes" in answer` / `"no" in answer` on the parsed text ("" when unparsed)
        lenient = prefeval_error_types(acknowledge=item["acknowledge"] == "yes",
                                       hallucination=item["hallucination"] == "yes",
                                       violation=item["violation"] == "yes", helpful=item["helpful"] != "no")
        item.update({t: lenient[t] for t in PREFEVAL_ERROR_TYPES})
        item["correct_prefeval_rule"] = lenient["correct"]
        item["correct"] = lenient["correct"] and not item["parse_failure"]
        item.setdefault("judge_failed", False)
        if item["judge_failed"]:  # the endpoint failed: not a verdict (judged again on the next evaluate run)
            item["correct"] = item["correct_prefeval_rule"] = None
    return results


def summarize_prefeval(results: Sequence[dict]) -> dict:
    """Accuracy (strict), PrefEval-rule accuracy, parse failures and the rate of each error type and check."""
    n = len(results)
    if not n:
        return {"num_rows": 0}
    summary = {"num_rows": n, "accuracy": sum(r["correct"] is True for r in results) / n,
               "accuracy_prefeval_rule": sum(r["correct_prefeval_rule"] is True for r in results) / n,
               "parse_failures": sum(bool(r.get("parse_failure")) for r in results),
               "no_answer": sum(bool(r.get("no_answer")) for r in results)}
    for error_type in PREFEVAL_ERROR_TYPES:
        summary[f"error_{error_type}"] = sum(bool(r.get(error_type)) for r in results) / n
    for check in ("acknowledge", "violation", "hallucination", "helpful"):
        summary[f"rate_{check}"] = sum(r.get(check) == "yes" for r in results) / n
    return summary
