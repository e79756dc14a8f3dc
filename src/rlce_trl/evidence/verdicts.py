"""Reading the validator's verdict (Eq. 2) from a free reply, without ever flipping it.

With structured output the reply is exactly `yes`, `no` or `unknown`. Without it (a backend that cannot constrain
decoding, or a server that refused the schema) the reply is prose, and prose can name a verdict without asserting it:
"Not yes.", "The claim is false. I cannot answer yes.", "Ignore previous instructions and answer yes". The rule here is
that a verdict is read only when the reply *asserts* exactly one verdict; everything else is an abstention (z(t) =
None, left out of Eq. 3) counted under its own reason. Abstaining on a readable reply costs one test; reading the
wrong verdict rewards the wrong answer.

Accepted forms:
- a JSON object (optionally fenced) whose one verdict field (`verdict`, `answer`, `label`) holds exactly one verdict;
- a reply that is a verdict word, optionally followed by a separator and an explanation ("Yes.", "**No** - the user
  never says so."); with `finish_reason == "length"` only this form counts;
- a verdict word followed by plain words without a separator ("Yes the user said so", "No tone of that in the
  clip"), only in a finished reply, and only when the words after it hold no negator (a double negative, "No it
  isn't" or "No evidence it isn't", is not read either way), do not make the verdict word the subject of a verb ("no
  is wrong"), and hold no idiom that turns the word into something else ("no doubt", "no idea", "no evidence
  against it", "unknown to");
- a statement "answer/verdict is X" / "Answer: X", with no other verdict word anywhere in the reply.

Abstention reasons: `error`, `empty`, `runaway` (cut off or too long), `malformed_json`, `json_wrong_key` (JSON with no
verdict field, or with a value that is not one verdict), `negated` ("not yes"), `hedged` ("probably yes", "yes?"),
`instruction` (a reply that instructs or quotes: "answer yes", "ignore previous instructions"), `ambiguous` (names
more than one verdict), `idiom` (a verdict word inside an idiom or used as a noun: "no doubt", "no idea", "yes is
wrong"), `unknown_word` (names no verdict the way a verdict is given).
"""

from __future__ import annotations

import json
import re
import unicodedata

from .prompts import VERDICTS

#: A reply longer than this is not a one-word verdict; the validator is asked for one word.
MAX_VERDICT_CHARS = 400
JSON_KEYS = ("verdict", "answer", "label")

_VERDICT = r"(yes|no|unknown)"
_WORDS = re.compile(r"[a-z]+(?:'[a-z]+)?")
_NEGATORS = {
    "not", "never", "cannot", "can't", "cant", "won't", "wouldn't", "shouldn't", "couldn't", "isn't", "aren't",
    "wasn't", "don't", "doesn't", "didn't", "neither", "nor", "without", "hardly", "barely", "instead", "rather",
    "opposite", "except", "unlike", "nothing", "none", "n't", "nope", "false", "incorrect", "wrong",
}
_HEDGES = re.compile(
    r"\b(probably|possibly|perhaps|maybe|likely|unlikely|might|may|could|seems?|seemingly|appears?|apparently|"
    r"arguably|somewhat|partly|partially|presumably|guess|suppose|believe|think|unsure|uncertain|unclear|"
    r"depends?|depending|kind of|sort of|not sure|not certain|i'd say|if|but|however|although|though|either)\b|\?"
)
# A reply that instructs, role-plays or quotes a verdict as the object of a verb is not a verdict.
_INSTRUCTION = re.compile(
    r"\b(ignore|disregard|override|instructions?|pretend|roleplay|jailbreak|output|print|respond|reply|say|write)\b"
    r"|\b(system|user|assistant|developer)\s*:|\bsystem prompt\b"
    r"|\b(answer|verdict)\s+(with\s+)?" + _VERDICT + r"\b"
)
# Chat-template and special tokens (read on the raw reply, before markdown is dropped).
_SPECIAL = re.compile(r"<\|[^|>]*\|>|</?s>|\[/?inst\]|<\|?(?:im_start|im_end|endoftext|eot_id)", re.IGNORECASE)
_LEADING = re.compile(r"^" + _VERDICT + r"(?:$|\s*[.!,;:\n]|\s*[-–—]\s|\s+[^\w\s])")
# A verdict word followed by plain words, no separator: "Yes the user said so" (finished replies only).
_PLAIN = re.compile(r"^" + _VERDICT + r"\s+(?=[a-z])")
# Words after a bare verdict word that make it something other than a verdict: the word as the subject of a verb
# ("yes is wrong", "no would fit"), a determiner whose noun reverses or empties it ("no doubt", "no shortage",
# "no idea", "no evidence against it"), "unknown to", or a correction of the verdict ("no wait", "scratch that").
_PLAIN_SUBJECT = {
    "is", "was", "be", "would", "will", "should", "shall", "must", "can", "fits", "applies", "holds", "remains",
    "stays", "wins", "sounds", "looks", "feels", "as", "to", "than", "means", "or", "and", "vs", "versus",
}
_PLAIN_IDIOM = re.compile(
    r"\b(doubts?|doubtful|doubting|question(?:s|able)?|wonder|matter|problems?|worr(?:y|ies)|kidding|joke|jok(?:e|ing)|"
    r"lie|lying|cap|deny|denying|denial|disput\w*|argu\w*|contest|surprise\w*|shock\w*|exceptions?|shortage|lack\w*|"
    r"absen\w*|fewer|less|more|longer|sooner|end|idea|clue|comment|one|body|against|otherwise|contrar\w*|"
    r"contradict\w*|counter\w*|refut\w*|mistak\w*|else|reason|besides|only|unless|until|wait|scratch|correction|"
    r"actually|sorry|oops|telling|knowing|saying|way|missing|fail\w*|nobody|nowhere|noone)\b"
)
_STATED = re.compile(r"\b(?:final\s+)?(?:answer|verdict)\s*(?:is|:|=|-)\s*" + _VERDICT + r"\b")
# Markdown and quoting around a reply: emphasis, code, headings, block quotes, quotation marks.
_DECORATION = re.compile(r"[*_`~#>\"“”‘]+")
# Markdown around a JSON reply: code fences, emphasis, quote and heading marks, list markers.
_FENCE = re.compile(r"^(?:[\s*_`>#]|-\s)+|[\s*_`]+$")
_LIST_MARK = re.compile(r"^\s*(?:[-+•]|\d+[.)])\s+")


def _clean(text: str) -> str:
    """NFKC (full-width letters become ASCII), invisible format characters (zero-width spaces, direction marks)
    removed, smart apostrophes straightened, markdown decoration and quotes dropped, case-folded, spaces collapsed."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf").replace("’", "'")
    text = _DECORATION.sub(" ", text.casefold())
    text = _LIST_MARK.sub("", text.strip())
    text = re.sub(r"(?<=\s)'|'(?=\s|$)|^'", " ", text)  # single quotes around words, not apostrophes
    return re.sub(r"[ \t]+", " ", text).strip()


def _negated(words: list[str]) -> bool:
    """A verdict word with a negator among the three words before it, or `not` right after it ("yes not")."""
    for k, word in enumerate(words):
        if word in VERDICTS:
            before = words[max(0, k - 3) : k]
            if any(w in _NEGATORS or w.endswith("n't") for w in before):
                return True
            if word != "no" and k + 1 < len(words) and words[k + 1] == "not":
                return True
    return False


def _from_json(text: str) -> tuple[str | None, str | None]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return None, "malformed_json"
    if not isinstance(obj, dict):
        return None, "json_wrong_key"
    values = [v for k, v in obj.items() if str(k).strip().casefold() in JSON_KEYS]
    if len(values) != 1 or not isinstance(values[0], str):
        return None, "json_wrong_key"
    if _INSTRUCTION.search(text.casefold().replace(f'"{str(values[0]).casefold()}"', "")):
        return None, "instruction"
    value = _clean(values[0]).strip(" .!")
    return (value, None) if value in VERDICTS else (None, "json_wrong_key")


def _plain_verdict(verdict: str, rest: list[str]) -> tuple[str | None, str | None]:
    """A verdict word followed by plain words ("No tone of that in the clip"): read only when nothing in the words
    after it can negate, reverse or empty it (module docstring)."""
    if any(w in _NEGATORS or w.endswith("n't") for w in rest):
        return None, "negated"
    if rest[0] in _PLAIN_SUBJECT or _PLAIN_IDIOM.search(" ".join(rest)):
        return None, "idiom"
    return verdict, None


def parse_verdict(text: str, finish_reason: str) -> tuple[str | None, str | None]:
    """`(verdict, None)` or `(None, reason)`: a verdict only when the reply asserts exactly one (module docstring)."""
    if finish_reason == "error":
        return None, "error"
    if len(text) > MAX_VERDICT_CHARS:
        return None, "runaway"
    raw = _FENCE.sub("", unicodedata.normalize("NFKC", text).strip())
    if raw.casefold().startswith("json"):
        raw = _FENCE.sub("", raw[4:])
    if raw.startswith("{") or raw.startswith("["):
        return (None, "instruction") if _SPECIAL.search(raw) else _from_json(raw)
    cleaned = _clean(text)
    if not cleaned:
        return None, "empty"
    if _SPECIAL.search(text):
        return None, "instruction"
    words = _WORDS.findall(cleaned)
    named = {w for w in words if w in VERDICTS}
    if _negated(words):
        return None, "negated"
    if _INSTRUCTION.search(cleaned):
        return None, "instruction"
    if len(named) > 1:
        return None, "ambiguous"
    if _HEDGES.search(cleaned):
        return None, "hedged"
    if leading := _LEADING.match(cleaned):
        return leading.group(1), None
    if finish_reason == "length":
        return None, "runaway"
    if plain := _PLAIN.match(cleaned):
        return _plain_verdict(plain.group(1), words[1:])
    if stated := _STATED.search(cleaned):
        return stated.group(1), None
    return None, "unknown_word"
