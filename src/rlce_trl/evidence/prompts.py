"""Prompt templates of the policy and of the frozen verifier (paper appendix C.3, figures 11-14).

The paper's figures did not survive extraction, so these are our own wording of what the text specifies:
- every verifier prompt starts with the same system message and then the sample context, so that all requests of a
  group share a long prefix (served once by a prefix cache) and differ only in the instruction at the end;
- construction sees the context, the question and the two candidate answers and writes one checkable claim about
  observable evidence that favours the first answer over the second;
- validation sees the context and one test, never the candidate answers, and answers yes / no / unknown;
- canonicalization sees the question and the candidate answers and judges numbered pairs for equivalence.
"""

from __future__ import annotations

from collections.abc import Sequence

VERIFIER_SYSTEM_PROMPT = (
    "You are a careful, impartial verifier. You read an input and answer exactly what you are asked about it, "
    "relying only on what the input actually shows."
)

VERDICTS = ("yes", "no", "unknown")


def render_context(prompt: str | Sequence[dict]) -> str:
    """The sample context `c` and question `q` as plain text: a conversational prompt becomes `Role: content` lines,
    with system messages (the solver's instructions, not part of the sample) left out."""
    if isinstance(prompt, str):
        return prompt.strip()
    lines = []
    for message in prompt:
        if message["role"] == "system":
            continue
        content = message["content"]
        if not isinstance(content, str):  # multimodal content blocks: keep the text parts
            content = " ".join(part.get("text", "") for part in content if part.get("type") == "text")
        lines.append(f"{message['role'].capitalize()}: {content.strip()}")
    return "\n\n".join(lines)


#: Longest candidate answer written into a verifier prompt, in characters (a free-text answer can be a whole response):
#: longer ones are cut with a marker, so one rambling or hostile rollout cannot fill the verifier's context.
MAX_ANSWER_CHARS = 2000


def cap_answer(answer: str, limit: int = MAX_ANSWER_CHARS) -> str:
    """`answer`, cut to `limit` characters (with ` [...]`) when longer."""
    return answer if len(answer) <= limit else answer[:limit].rstrip() + " [...]"


def _drop_options_lines(text: str, labels: Sequence[str] | None = None) -> str:
    """Remove `Options: a, b, c.` lines (the line `rlce_trl.data.hba.options_line` appends); with `labels`, only a
    line that names every label, so that an ordinary sentence starting with "Options:" survives."""
    def lists_options(line: str) -> bool:
        listed = line.casefold()
        return line.strip().startswith("Options:") and (labels is None or all(x.casefold() in listed for x in labels))

    return "\n".join(line for line in text.split("\n") if not lists_options(line))


def context_without_options(context: str, labels: Sequence[str] | None) -> str:
    """The sample context with the closed-label options line removed: the RLCE validator (candidate answers are
    removed from its input, appendix C.1) and the D.2 judge ("not shown the remaining answer options") never see it."""
    return _drop_options_lines(context, labels) if labels else context


def _messages(context: str, instruction: str, prompts=None, kind: str = "") -> list[dict[str, str]]:
    """System message, then (with a prompt set) its few-shot examples of this kind as earlier turns, then the task."""
    system = prompts.system if prompts is not None else VERIFIER_SYSTEM_PROMPT
    shots = prompts.example_turns(kind) if prompts is not None else []
    return [{"role": "system", "content": system}, *shots,
            {"role": "user", "content": f"### Input\n{context}\n\n### Task\n{instruction}"}]


#: Default instruction of the construction prompt; `{favoured}` and `{other}` are filled in verbatim.
CONSTRUCTION_TEMPLATE = (
    "Two candidate answers to the final request in the input are being compared.\n"
    "Answer A: {favoured}\n"
    "Answer B: {other}\n\n"
    "Write one evidence test: a short claim about something observable in the input (what was said, asked, "
    "stated or shown) that, if it is true, favours Answer A over Answer B. Describe only the evidence itself; "
    "do not mention or quote either answer. Reply with the claim as one sentence and nothing else."
)

#: Default instruction of the validation prompt; `{test}` is filled in verbatim.
VALIDATION_TEMPLATE = (
    "Claim: {test}\n\n"
    "Is this claim supported by the input? Answer yes if the input shows it, no if the input shows it is "
    "false or it is absent, unknown if the input is not enough to decide. Reply with one word: yes, no or "
    "unknown."
)


def fill(template: str, **values: str) -> str:
    """Put values into `{name}` slots by plain replacement (braces inside the values or elsewhere stay as they are)."""
    for name, value in values.items():
        template = template.replace("{" + name + "}", value)
    return template


def construction_messages(context: str, favoured: str, other: str, prompts=None) -> list[dict[str, str]]:
    """Figure 11: one evidence test favouring `favoured` over `other` (Eq. 1). `prompts`: an optional
    `VerifierPrompts` (evidence/prompt_set.py) replacing the default text."""
    template = prompts.construction if prompts is not None else CONSTRUCTION_TEMPLATE
    text = fill(template, favoured=cap_answer(favoured), other=cap_answer(other))
    return _messages(context, text, prompts, "construction")


def pointwise_construction_messages(context: str, answer: str) -> list[dict[str, str]]:
    """Pointwise ablation (section 4.3): one test whose truth would support `answer`, built with no other answer."""
    instruction = (
        f"A candidate answer to the final request in the input is: {cap_answer(answer)}\n\n"
        "Write one evidence test: a short claim about something observable in the input (what was said, asked, "
        "stated or shown) that, if it is true, supports this answer. Describe only the evidence itself; do not "
        "mention or quote the answer. Reply with the claim as one sentence and nothing else."
    )
    return _messages(context, instruction)


def validation_messages(context: str, test: str, prompts=None) -> list[dict[str, str]]:
    """Figure 12: is the claim of one test satisfied by the input? The candidate answers are not shown.
    `prompts`: an optional `VerifierPrompts` replacing the default text."""
    template = prompts.validation if prompts is not None else VALIDATION_TEMPLATE
    return _messages(context, fill(template, test=test), prompts, "validation")


def equivalence_messages(context: str, answers: Sequence[str], pairs: Sequence[tuple[int, int]]) -> list[dict]:
    """Figure 14: one call that judges every remaining pair of free-text answers for semantic equivalence."""
    listed = "\n".join(f"{k + 1}. {cap_answer(answer)}" for k, answer in enumerate(answers))
    asked = "\n".join(f"P{m + 1}: {i + 1} and {j + 1}" for m, (i, j) in enumerate(pairs))
    keys = ", ".join(f'"P{m + 1}": "different" or "same"' for m in range(len(pairs)))
    instruction = (
        f"Candidate answers to the final request in the input:\n{listed}\n\n"
        "For each pair below, say \"same\" only if the two answers recommend or state the same thing and could "
        "replace each other; answers that name different things are \"different\", even if both are reasonable.\n"
        f"{asked}\n\nReply with JSON only: {{{keys}}}"
    )
    return _messages(context, instruction)


def equivalence_schema(num_pairs: int) -> dict:
    """JSON schema of the equivalence reply, for backends with structured output."""
    keys = [f"P{m + 1}" for m in range(num_pairs)]
    return {
        "type": "object",
        "properties": {key: {"type": "string", "enum": ["same", "different"]} for key in keys},
        "required": keys,
        "additionalProperties": False,
    }
