"""The trainable policy's side of the prompts: its system prompt (paper figure 13) and how a completion's text is
read. The frozen verifier's prompts live in `rlce_trl.evidence.prompts`."""

from __future__ import annotations

#: System prompt of the trainable policy (figure 13): reason, then end with the answer in \boxed{}.
SOLVER_SYSTEM_PROMPT = (
    "You are a helpful assistant. Read the whole conversation carefully, including what the user has said about "
    "themselves earlier. Answer the final request, then end your response with your final answer written as "
    "\\boxed{your answer}."
)


def completion_text(completion) -> str:
    """The text of a completion, standard (`str`) or conversational (list of messages): the assistant's turns, without
    tool results (a turn that only calls a tool has empty or no content; a content-parts list gives its text)."""
    if isinstance(completion, str):
        return completion
    return "".join(_text(m.get("content")) for m in completion if m.get("role", "assistant") == "assistant")


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        parts = [part for part in content if isinstance(part, dict) and part.get("type") == "text"]
        return "".join(part.get("text") or "" for part in parts)
    return ""
