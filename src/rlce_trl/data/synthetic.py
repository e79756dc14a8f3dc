"""A seeded, gold-labelled offline task: numbered evidence sentences (next-capabilities §0.7).

Each row shows T numbered sentences ("Sentence 3: Maya left the parcel at the blue door."), the text analogue of
video frames, then a question with 2-4 options. One or two sentences are the gold evidence (a one-hop fact, or a
two-hop hand-over: "Maya gave the parcel to Tom." + "Tom left the parcel in the garden."); the others are
distractors that name the other options with other people, and filler. The gold answer and the 1-based gold
evidence indices (the "true keyframes") are stored on the row, so closed-label accuracy and citation quality (EGS)
can be measured for a policy as small as SmolLM2-135M-Instruct without downloads.

Row shape (the package's GRPO-ready format): `prompt`, `answer_options`, `question`, `task`, `id`, `num_frames`
(= T, read by the Elect rewards), and, unless `split="train"`, `gold` and `evidence`. `supervised=True` adds the
gold answer as `solution` for Elect's paper-faithful gold gate.
"""

from __future__ import annotations

import random

TASK = "numbered_evidence"
PEOPLE = ["Maya", "Tom", "Lena", "Omar", "Priya", "Jonas", "Chen", "Rosa", "Ivan", "Aisha", "Leo", "Nora"]
OBJECTS = ["parcel", "umbrella", "laptop", "basket", "guitar", "lantern", "notebook", "bicycle"]
PLACES = ["the blue door", "the garden", "the garage", "the kitchen", "the library", "the attic", "the station",
          "the bakery"]
FILLER = [
    "The weather was mild that afternoon.",
    "A radio was playing quietly somewhere.",
    "The street lights came on at six.",
    "Someone had painted the fence last week.",
    "A cat slept on the warm windowsill.",
    "The bus to the city was late again.",
    "Fresh bread was cooling on a rack.",
    "Two birds argued on the roof.",
]
BOXED_INSTRUCTION = "Give the final answer as \\boxed{option}."
#: ELECT_SYSTEM_PROMPT with sentences in place of frames; the tags stay those of the Elect schema.
ELECT_INSTRUCTION = (
    "Think inside <think></think>, citing sentences by number; list the sentence numbers you relied on, "
    "comma-separated, inside <keyframes></keyframes>; give the final answer inside <answer></answer>."
)


def _place(p: str) -> str:
    return p.replace("the ", "", 1)


def numbered_evidence_row(rng: random.Random, index: int, num_sentences: int = 8, style: str = "elect") -> dict:
    """One row drawn from `rng`; `style="elect"` asks for the Elect schema, `"boxed"` for a `\\boxed{}` answer."""
    num_options = rng.choice([2, 3, 4])
    options = rng.sample(PLACES, num_options)
    gold = options[0]
    people = rng.sample(PEOPLE, 2 + num_options)
    subject, helper, others = people[0], people[1], people[2:]
    obj = rng.choice(OBJECTS)
    two_hop = rng.random() < 0.5 and num_sentences >= 4
    evidence_text = ([f"{subject} gave the {obj} to {helper}.", f"{helper} left the {obj} at {gold}."] if two_hop
                     else [f"{subject} left the {obj} at {gold}."])
    distractors = [f"{name} left the {obj} at {place}." for name, place in zip(others, options[1:], strict=False)]
    distractors += [f"{name} walked past {rng.choice(PLACES)}." for name in others[len(options) - 1 :]]
    body = distractors[: num_sentences - len(evidence_text)]
    body += rng.sample(FILLER, min(len(FILLER), num_sentences - len(evidence_text) - len(body)))
    rng.shuffle(body)
    slots = sorted(rng.sample(range(num_sentences), len(evidence_text)))
    it = iter(body)
    sentences = [evidence_text[slots.index(i)] if i in slots else next(it) for i in range(num_sentences)]
    shown = [_place(o) for o in options]
    rng.shuffle(shown)
    question = f"Where did the {obj} that {subject} had end up?"
    lines = "\n".join(f"Sentence {i + 1}: {s}" for i, s in enumerate(sentences))
    instruction = ELECT_INSTRUCTION if style == "elect" else BOXED_INSTRUCTION
    content = (f"Read the numbered sentences and answer the question.\n{lines}\nQuestion: {question}\n"
               f"Options: {', '.join(shown)}\nThere are {num_sentences} sentences, numbered 1 to {num_sentences}. "
               f"{instruction}")
    return {"id": f"{TASK}-{index}", "task": TASK, "prompt": [{"role": "user", "content": content}],
            "answer_options": shown, "question": question, "num_frames": num_sentences, "gold": _place(gold),
            "evidence": [s + 1 for s in slots], "hops": 2 if two_hop else 1}


def numbered_evidence(n: int, seed: int = 0, num_sentences: int = 8, style: str = "elect", split: str = "test",
                      supervised: bool = False) -> list[dict]:
    """`n` rows, reproducible from `seed`. Train rows (`split="train"`) carry no `gold`/`evidence`, because TRL
    passes every column to the reward functions; `supervised=True` adds `solution` for the gold gate."""
    problems = []
    if n < 0:
        problems.append(f"n={n}: use 0 or more")
    if not 4 <= num_sentences <= 16:
        problems.append(f"num_sentences={num_sentences}: use 4 to 16")
    if style not in ("elect", "boxed"):
        problems.append(f"style={style!r}: use 'elect' or 'boxed'")
    if split not in ("train", "validation", "test"):
        problems.append(f"split={split!r}: use train, validation or test")
    if problems:
        raise ValueError("numbered_evidence:\n  - " + "\n  - ".join(problems))
    rng = random.Random(f"{TASK}:{seed}:{split}")
    rows = [numbered_evidence_row(rng, i, num_sentences, style) for i in range(n)]
    for row in rows:
        if supervised:
            row["solution"] = row["gold"]
        if split == "train":
            row.pop("gold")
            row.pop("evidence")
    return rows


def evidence_grounding_score(cited: set[int] | frozenset[int], invalid: int, gold: list[int] | set[int]) -> float:
    """EGS = 1/2 (valid fraction of the citations + Jaccard with the gold evidence); 0 without citations [ours]."""
    total = len(cited) + invalid
    if not total:
        return 0.0
    gold = set(gold)
    union = len(set(cited) | gold)
    return 0.5 * (len(cited) / total + (len(set(cited) & gold) / union if union else 0.0))
