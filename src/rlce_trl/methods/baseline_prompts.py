"""Prompt templates of the label-free baselines (paper appendix D, figures 15-16; DR Tulu's rubric prompts).

The paper's figures did not survive extraction, so these are our own wording of what appendix D specifies. All of
them use the RLCE verifier layout ([`rlce_trl.evidence.prompts._messages`]): the shared verifier system prompt, then
an `### Input` block, then the `### Task` instruction, so that every request of one group shares the input block as a
prefix (a prefix cache serves it once) and differs only at the end.

What each role is shown (appendix D):
- USC selector (D.1): the question and the group's parseable responses only; not the sample context (video,
  transcript, preference turns), not the answer options, never the gold answer.
- Policy judge (D.2): the question, the available input evidence (the context and the clip) and ONE proposed answer
  (closed labels) or proposed response (free text); for closed-label tasks the remaining options are not shown, so
  the options line is removed from the context.
- Rubric seed / per-visit generator (D.3): the sample context and the clip (and, per visit, the rollouts and the
  current buffer).
- Rubric judge (D.3): text-only; a generic task question (the dataset's question, identical for every clip of a
  closed-label task, plus the response-shape sentence), the full policy response and one rubric.
- Rubric policy (D.3): asked for `<answer>` and a 1-3 sentence `<justification>` ([`rubric_policy_system`]).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from ..evidence.prompts import _drop_options_lines, _messages

#: Answers of the judges with guided choice.
YES_NO = ("Yes", "No")
RUBRIC_SCORES = ("0", "1", "2")


# -- what each role may see -------------------------------------------------------------------------------------------
def _blocks(context: str) -> list[str]:
    """`render_context` joins turns as `Role: content` blocks separated by blank lines; content may itself hold blank
    lines, so a block starts at a line that opens with a role name."""
    blocks: list[str] = []
    for line in context.split("\n"):
        if re.match(r"^(User|Assistant|System|Tool): ", line) or not blocks:
            blocks.append(line)
        else:
            blocks[-1] += "\n" + line
    return [b.strip() for b in blocks if b.strip()]


def question_of(context: str) -> str:
    """The question `q` of a rendered context: the last user turn, without its `User: ` role tag and without an
    options line. PrefEval puts the question alone in the last user turn, so the preference evidence of earlier
    turns is left out, as D.1 requires; a single-turn sample (HBA) has nothing else to cut, so pass a `question_fn`
    to the scorer (or set `group.question`) when the context and the question share one turn."""
    blocks = _blocks(context)
    users = [b for b in blocks if b.startswith("User: ")]
    last = users[-1][len("User: ") :] if users else (blocks[-1] if blocks else context)
    return _drop_options_lines(last).strip()


# -- Universal Self-Consistency (D.1, figure 15) ----------------------------------------------------------------------
def usc_messages(question: str, responses: Sequence[str]) -> list[dict[str, str]]:
    """USC selection (Chen et al., 2023): which response is most consistent with the majority of the responses?
    The question is the shared input; the responses and the instruction follow."""
    listed = "\n\n".join(f"Response {k + 1}:\n{text.strip()}" for k, text in enumerate(responses))
    instruction = (
        f"Several responses to the question above were sampled:\n\n{listed}\n\n"
        "Evaluate these responses and select the one that is most consistent with the majority of the responses, "
        "judging by their final answers. Reply with the number of that response only (for example: 2)."
    )
    return _messages(question, instruction)


def parse_usc_choice(text: str, num_responses: int) -> int | None:
    """0-based index of the selected response, or `None`. Accepts "2", "Response 2", "The most consistent response
    is Response 2." (the phrasing of Chen et al.); the first number in range wins."""
    for match in re.finditer(r"\d+", text):
        k = int(match.group(0))
        if 1 <= k <= num_responses:
            return k - 1
    return None


# -- Policy LLM-Judge (D.2, figure 16) --------------------------------------------------------------------------------
def judge_messages(context: str, answer: str, response: bool = False) -> list[dict[str, str]]:
    """Pointwise judgment of one proposed answer (closed labels) or one proposed response (`response=True`, free text,
    D.2): is it correct? The context (question and input evidence) is the shared prefix; only the answer differs
    between the requests of a group."""
    noun, sep = ("response", "\n") if response else ("answer", " ")
    instruction = (
        f"Proposed {noun} to the final request in the input:{sep}{answer}\n\n"
        f"Is the proposed {noun} correct? Reply with one word: Yes or No."
    )
    return _messages(context, instruction)


def parse_yes_no(text: str) -> str | None:
    """"yes" / "no" from the first word of a reply (markdown and punctuation ignored), else the only one named;
    `None` when unreadable."""
    words = re.findall(r"[a-z]+", text.casefold())
    if words and words[0] in ("yes", "no"):
        return words[0]
    named = {w for w in words if w in ("yes", "no")}
    return named.pop() if len(named) == 1 else None


# -- Rubrics (D.3; DR Tulu) -------------------------------------------------------------------------------------------
def _task_question(labels: Sequence[str]) -> str | None:
    """The one task question of the closed-label task with these labels (the task's `rubric_question`,
    [`rlce_trl.data.tasks`]); the rubric judge reads it instead of the row's question (which holds the clip's
    transcript)."""
    from ..data.tasks import TASKS

    return next((t.rubric_question for t in TASKS.values() if t.rubric_question and t.labels == tuple(labels)), None)


def response_shape(labels: Sequence[str] | None, source: str = "clip") -> str:
    """D.3's response-shape sentence: "Answer with exactly one of: {labels}, and support the answer with 1 to 3
    sentences of evidence from the clip." (free text: "Answer in one short sentence, ..."). `source` names where the
    evidence comes from ("clip", or "input" for rows without one)."""
    head = f"Answer with exactly one of: {', '.join(labels)}" if labels else "Answer in one short sentence"
    return f"{head}, and support the answer with 1 to 3 sentences of evidence from the {source}."


def rubric_task_question(question: str, labels: Sequence[str] | None, source: str = "clip") -> str:
    """The rubric judge's `{task question}` (D.3): the dataset's one question for a known closed label set (else
    `question`, the row's own), plus the response-shape sentence."""
    generic = _task_question(labels) if labels else None
    return f"{generic or question.strip()} {response_shape(labels, source)}"


def rubric_policy_system(labels: Sequence[str] | None, source: str = "clip") -> str:
    """The rubric baselines' policy system prompt (D.3: the justification is what the rubrics score): the
    response-shape sentence and the `<answer>` / `<justification>` tags that the format term checks."""
    return (
        "You are a helpful assistant. Read the whole input carefully. "
        f"{response_shape(labels, source)} Write the answer inside <answer></answer>, then the evidence inside "
        "<justification></justification>, and nothing else."
    )


def _rubric_list(rubrics: Sequence[dict]) -> str:
    listed = "\n".join(f"- [{'positive' if r['weight'] > 0 else 'negative'}] {r['text']}" for r in rubrics)
    return listed or "(none yet)"


def rubric_schema(min_items: int, max_items: int) -> dict:
    """JSON schema of a rubric list: `{"rubrics": [{"criterion": str, "type": "positive" | "negative"}]}`."""
    return {
        "type": "object",
        "properties": {
            "rubrics": {
                "type": "array",
                "minItems": min_items,
                "maxItems": max_items,
                "items": {
                    "type": "object",
                    "properties": {
                        "criterion": {"type": "string"},
                        "type": {"type": "string", "enum": ["positive", "negative"]},
                    },
                    "required": ["criterion", "type"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["rubrics"],
        "additionalProperties": False,
    }


_RUBRIC_RULES = (
    "A positive criterion describes a trait a good response has; a negative criterion describes a FAILURE a bad "
    "response shows (write it as the failure itself, e.g. \"The response claims the speaker is joking without any "
    "cue in the input\", never as \"The response should not ...\"). Do not write a positive and a negative version "
    "of the same criterion. Each criterion must be checkable from the response text alone.\n\n"
    'Reply with JSON only: {"rubrics": [{"criterion": "...", "type": "positive" or "negative"}, ...]}'
)


def rubric_seed_messages(context: str, min_items: int, max_items: int) -> list[dict[str, str]]:
    """Seed pass (D.3): the persistent rubrics of one sample, written once from its context."""
    instruction = (
        f"Write {min_items} to {max_items} grading criteria (rubrics) for responses to the final request in the "
        f"input, specific to this input. {_RUBRIC_RULES}"
    )
    return _messages(context, instruction)


def rubric_generation_messages(context: str, responses: Sequence[str], rubrics: Sequence[dict],
                               max_items: int) -> list[dict[str, str]]:
    """Per-visit generation (D.3, Evolving Rubrics only): 0 to `max_items` new rubrics from the group's rollouts
    and the current buffer."""
    listed = "\n\n".join(f"Response {k + 1}:\n{text.strip()}" for k, text in enumerate(responses))
    instruction = (
        f"Responses to the final request in the input:\n\n{listed}\n\n"
        f"Current grading criteria:\n{_rubric_list(rubrics)}\n\n"
        f"Propose up to {max_items} NEW criteria that would tell these responses apart and that the current ones "
        f"miss; propose none if the current criteria already cover everything. {_RUBRIC_RULES}"
    )
    return _messages(context, instruction)


def rubric_judge_messages(question: str, response: str, rubric: str) -> list[dict[str, str]]:
    """Rubric judge (D.3, DR Tulu's scoring sentence): how well the response meets one criterion, 0, 1 or 2. The
    judge is text-only and never told whether the rubric is positive or negative. The question and the response are
    the shared prefix of all rubrics of one response."""
    context = f"Question: {question.strip()}\n\nResponse:\n{response.strip()}"
    instruction = (
        f"Criterion: {rubric}\n\n"
        "How appropriately does the response meet this criterion? Reply with one digit: 2 if it clearly meets it, "
        "1 if it partly meets it, 0 if it does not."
    )
    return _messages(context, instruction)


def parse_rubric_score(text: str) -> int | None:
    """0 / 1 / 2 from a judge reply: a JSON `{"score": n}` or the first standalone digit 0-2; `None` otherwise."""
    stripped = text.strip().strip("`")
    match = re.search(r"\{.*\}", stripped, flags=re.DOTALL)
    if match:
        try:
            obj = json.loads(match.group(0))
            value = obj.get("score") if isinstance(obj, dict) else None
            if value in (0, 1, 2) or str(value) in RUBRIC_SCORES:
                return int(value)
        except (json.JSONDecodeError, TypeError, ValueError):
            pass
    match = re.search(r"(?<![\d.])([0-2])(?![\d.])", stripped)
    return int(match.group(1)) if match else None


def parse_rubrics(text: str, max_items: int) -> tuple[list[dict], str | None]:
    """Rubrics from a generator reply: `([{"text", "weight"}], None)` or `([], reason)` with reason
    `malformed_json` / `empty`. Accepts the schema's JSON object, a bare JSON list, or `[positive] ...` /
    `[negative] ...` lines. Weight +1 for positive, -1 for negative (D.3); at most `max_items` kept."""
    items: list[dict] = []
    match = re.search(r"[\[{].*[\]}]", text, flags=re.DOTALL)
    try:
        parsed = json.loads(match.group(0)) if match else None
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        parsed = parsed.get("rubrics", [])
    if isinstance(parsed, list):
        for entry in parsed:
            if not isinstance(entry, dict):
                continue
            criterion = str(entry.get("criterion") or entry.get("description") or entry.get("text") or "").strip()
            kind = str(entry.get("type") or entry.get("polarity") or "positive").casefold()
            weight = entry.get("weight")
            if isinstance(weight, (int, float)) and weight != 0:
                sign = 1 if weight > 0 else -1
            else:
                sign = -1 if kind.startswith("neg") else 1
            if criterion:
                items.append({"text": criterion, "weight": sign})
    else:
        for line in text.splitlines():
            found = re.match(r"^\s*[-*]?\s*\[(positive|negative)\]\s*(.+)$", line, flags=re.IGNORECASE)
            if found:
                weight = 1 if found.group(1).lower() == "positive" else -1
                items.append({"text": found.group(2).strip(), "weight": weight})
        if not items:
            return [], "malformed_json" if match or text.strip() else "empty"
    # the same criterion twice counts the same behaviour twice (D.3): keep the first
    unique: dict[str, dict] = {}
    for item in items:
        unique.setdefault(rubric_key(item["text"]), item)
    return list(unique.values())[:max_items], None


def rubric_key(text: str) -> str:
    """What makes two rubrics the same criterion: their text with case and whitespace folded."""
    return " ".join(text.casefold().split())
