"""How much redaction changes evidence tests, and the verdicts a real validator gives them, per redaction mode.

    python -m benchmarks.redaction [--model smollm2-135m-instruct] [--sources sample,closed,scripted] [--prompts 40]

Sources of tests (each test with the candidate answers of its comparison and, for closed labels, the label set):
- `sample`: the bundled preference sample (free text, the first `--prompts` of its 40 prompts); two answers per
  prompt sampled from the model, one test per direction built by the model with RLCE's construction prompt;
- `closed`: closed-label tests built by the model with RLCE's construction prompt for MOSEI (7 labels, two label
  pairs per utterance) and UR-FUNNY (humour / not humour) on text stand-ins of clips (a transcript line of our own);
- `scripted`: 24 fixed tests that describe affect in plain words ("The speaker sounds positively upbeat."), for the
  same label sets, so the figures do not hinge on what a 135M model writes.

For each mode (`none`: no redaction, `answers`: the candidate answers and label strings as written, the default,
`inflections`: every label inflection too) it prints how often a test is changed, how often a word describing the
*favoured* label (an inflection that mode `answers` keeps) survives, and the validator's verdict mix (greedy, RLCE's
validation prompt, options line removed) on the tests as that mode shows them. The validator is the model itself,
read as training reads it (argmax) and through the packaged verdict calibration when there is one for the model
(`--calibration`, default `<model>`; SmolLM2 answers "yes" to almost every claim uncalibrated).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections import Counter

MODES = ("none", "answers", "inflections")

MOSEI_UTTERANCES = [
    "Honestly this was the best film I have seen all year, I loved every minute.",
    "The plot was fine I guess, nothing special, some parts worked and some did not.",
    "I want my two hours back, the acting was awful and the ending made no sense.",
    "It is a documentary about rivers, it runs ninety minutes and covers three countries.",
    "I was pleasantly surprised, the second half really picked up and the music was great.",
    "What a disaster, the sound kept cutting out and the story dragged on forever.",
    "The director clearly cared about the details and it shows, I would watch it again.",
    "There were a few nice moments but overall I found it a bit boring and too long.",
    "This phone is okay, the battery lasts a day and the camera is average.",
    "I absolutely hated the new menu, everything was cold and overpriced.",
]
URFUNNY_UTTERANCES = [
    "So I told my doctor I broke my arm in two places. He said stop going to those places.",
    "Thank you all for coming tonight, the next speaker will talk about water policy.",
    "My wife said I should do lunges to stay in shape. That would be a big step forward.",
    "The quarterly figures show a three percent rise in revenue over the last period.",
    "I used to be a banker, but I lost interest.",
    "Please remember to switch off your phones during the presentation.",
    "I asked the librarian for books about paranoia. She whispered, they are right behind you.",
    "We will now take a short break and resume at eleven.",
]
MOSEI_QUESTION = "What is the sentiment expressed by the speaker in this clip?"
URFUNNY_QUESTION = "Is the punchline of this clip humorous?"
# (test, favoured label, other label, task): plain words for affect, the shape the issue worried about.
SCRIPTED = [
    ("The speaker sounds positively upbeat, neutrality absent, negativity absent.", "positive", "negative", "mosei"),
    ("The speaker praises the film and says they loved every minute.", "positive", "negative", "mosei"),
    ("The speaker's tone is positive throughout.", "positive", "neutral", "mosei"),
    ("The speaker expresses strong positivity about the music.", "highly positive", "positive", "mosei"),
    ("The speaker calls the acting awful, a clearly negative judgement.", "negative", "neutral", "mosei"),
    ("The speaker's words carry negativity about the ending.", "negative", "weakly negative", "mosei"),
    ("The speaker sounds negatively surprised by the price.", "highly negative", "negative", "mosei"),
    ("The speaker is neutral, listing facts without judging them.", "neutral", "positive", "mosei"),
    ("The speaker describes the length of the film in a neutral, factual way.", "neutral", "weakly positive",
     "mosei"),
    ("The speaker shows mild positivity but with reservations.", "weakly positive", "neutral", "mosei"),
    ("The speaker is weakly negative, calling parts of it boring.", "weakly negative", "neutral", "mosei"),
    ("The speaker never says anything negative.", "positive", "negative", "mosei"),
    ("The punchline is humorous: a pun on 'places'.", "humour", "not humour", "urfunny"),
    ("The clip contains humour in its final line.", "humour", "not humour", "urfunny"),
    ("The audience laughs after the punchline, a sign of humor.", "humour", "not humour", "urfunny"),
    ("The speaker sets up a joke and delivers a humorous twist.", "humour", "not humour", "urfunny"),
    ("The final line is a pun on 'lost interest'.", "humour", "not humour", "urfunny"),
    ("The remark is wordplay meant to be funny.", "humour", "not humour", "urfunny"),
    ("The clip is an announcement with no humorous intent.", "not humour", "humour", "urfunny"),
    ("The speaker reads figures in a flat, serious tone; this is not humour.", "not humour", "humour", "urfunny"),
    ("Nothing in the clip is humorous; it is a scheduling notice.", "not humour", "humour", "urfunny"),
    ("The speaker gives instructions, with no joke or punchline.", "not humour", "humour", "urfunny"),
    ("Nobody laughs and the tone is formal.", "not humour", "humour", "urfunny"),
    ("The clip lacks any humour.", "not humour", "humour", "urfunny"),
]


def closed_contexts() -> list[tuple[str, tuple[str, ...], str]]:
    from rlce_trl.data.hba import MOSEI_LABELS, URFUNNY_LABELS, options_line

    out = []
    for utterance in MOSEI_UTTERANCES:
        out.append((f"User: Transcript: \"{utterance}\"\n{MOSEI_QUESTION}\n{options_line(MOSEI_LABELS)}",
                    MOSEI_LABELS, "mosei"))
    for utterance in URFUNNY_UTTERANCES:
        out.append((f"User: Transcript: \"{utterance}\"\n{URFUNNY_QUESTION}\n{options_line(URFUNNY_LABELS)}",
                    URFUNNY_LABELS, "urfunny"))
    return out


def build_tests(verifier, sources: list[str], seed: int, prompts: int = 40) -> list[dict]:
    """Each test: `{source, context, text, answers, favoured, labels}`."""
    from rlce_trl.data.hba import MOSEI_LABELS, URFUNNY_LABELS
    from rlce_trl.data.sample import load_preference_sample
    from rlce_trl.evidence.answers import extract_answer
    from rlce_trl.evidence.construction import parse_test
    from rlce_trl.evidence.prompts import construction_messages, render_context
    from rlce_trl.verifiers.base import Request, Sampling

    rng = random.Random(seed)
    construct = Sampling(temperature=1.0, top_p=0.95, top_k=20, max_tokens=128, one_line=True)
    jobs = []  # (source, context, answers, favoured, other, labels, n)
    tests = []
    if "sample" in sources:
        rows = (load_preference_sample("train") + load_preference_sample("test"))[:prompts]
        requests = [Request(messages=[m for m in row["prompt"] if m["role"] != "system"],
                            sampling=Sampling(temperature=1.0, top_p=0.95, max_tokens=64, n=2)) for row in rows]
        for row, reply in zip(rows, verifier.generate(requests), strict=True):
            answers = [extract_answer(t) or t for t in reply.texts]
            if len(answers) == 2 and answers[0].strip() != answers[1].strip():
                context = render_context(row["prompt"])
                jobs += [("sample", context, answers, 0, 1, None, 1), ("sample", context, answers, 1, 0, None, 1)]
    if "closed" in sources:
        for context, labels, task in closed_contexts():
            pairs = [tuple(rng.sample(labels, 2)) for _ in range(2)] if task == "mosei" else [tuple(labels)]
            for a, b in pairs:
                jobs += [("closed", context, [a, b], 0, 1, labels, 3), ("closed", context, [a, b], 1, 0, labels, 3)]
    if jobs:
        requests = [
            Request(messages=construction_messages(ctx, ans[f], ans[o]),
                    sampling=Sampling(construct.temperature, construct.top_p, construct.top_k, construct.max_tokens,
                                      n, one_line=True), stage="construction")
            for _, ctx, ans, f, o, _, n in jobs
        ]
        for (source, context, answers, f, _, labels, _), reply in zip(jobs, verifier.generate(requests), strict=True):
            for text, finish in zip(reply.texts, reply.finish_reasons, strict=False):
                claim, _ = parse_test(text, "error" if reply.error else finish)
                if claim:
                    tests.append({"source": source, "context": context, "text": claim, "answers": answers,
                                  "favoured": answers[f], "labels": labels})
    if "scripted" in sources:
        contexts = {task: [c for c in closed_contexts() if c[2] == task] for task in ("mosei", "urfunny")}
        for text, favoured, other, task in SCRIPTED:
            labels = MOSEI_LABELS if task == "mosei" else URFUNNY_LABELS
            context = rng.choice(contexts[task])[0]
            tests.append({"source": "scripted", "context": context, "text": text, "answers": [favoured, other],
                          "favoured": favoured, "labels": labels})
    return tests


def shown(test: dict, mode: str) -> str:
    from rlce_trl.evidence.validation import redact_answers

    return test["text"] if mode == "none" else redact_answers(test["text"], test["answers"], test["labels"], mode)


def favoured_word_kept(test: dict, text: str) -> bool:
    """A word built on the favoured label's stem (an inflection, e.g. "positively" for "positive") is still there."""
    if not test["labels"]:
        return False
    stems = [w[:-1] if w[-1] in "ey" else w for w in test["favoured"].split() if len(w) >= 4 and w != "not"]
    return any(re.search(r"(?<!\w)" + re.escape(s).replace("our", "ou?r") + r"\w*", text, re.IGNORECASE)
               for s in stems)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--sources", default="sample,closed,scripted")
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prompts", type=int, default=40, help="Prompts of the bundled sample (at most 40).")
    parser.add_argument("--calibration", default=None, help="Verdict calibration file or built-in name.")
    args = parser.parse_args(argv)

    import torch

    from rlce_trl.evidence.validation import parse_verdict, validation_request
    from rlce_trl.models import resolve_model
    from rlce_trl.verifiers.calibrated import VerdictCalibration, builtin_calibration
    from rlce_trl.verifiers.transformers_backend import TransformersVerifier, load_frozen_model

    calibration_path = builtin_calibration(args.calibration or args.model)
    calibration = VerdictCalibration.load(calibration_path) if calibration_path.exists() else None
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    model, tokenizer = load_frozen_model(resolve_model(args.model), dtype="float32")
    verifier = TransformersVerifier(model, tokenizer, batch_size=args.batch_size)
    tests = build_tests(verifier, args.sources.split(","), args.seed, args.prompts)
    built = time.perf_counter()

    # One greedy validation per distinct (context, shown test): modes that show the same text share the verdict.
    keys = {(t["context"], shown(t, m), t["labels"]) for t in tests for m in MODES}
    keys = sorted(keys, key=str)
    requests = [validation_request(ctx, text, 16, labels) for ctx, text, labels in keys]
    verdicts, calibrated = {}, {}
    for key, reply in zip(keys, verifier.generate(requests), strict=True):
        text, finish = (reply.texts[0], reply.finish_reasons[0]) if reply.texts else ("", "error")
        verdicts[key] = parse_verdict(text, "error" if reply.error else finish)[0] or "invalid"
        if calibration is not None and reply.choice_logprobs and reply.error is None:
            calibrated[key] = calibration.verdict(reply.choice_logprobs)
        else:
            calibrated[key] = verdicts[key]

    print(f"\nmodel {args.model}; {len(tests)} tests built in {built - start:.0f} s, {len(keys)} validations")
    print(f"calibration: {calibration_path if calibration is not None else 'none'}")
    print("\n| source | tests | mode | changed | favoured-label word kept | yes / no / unknown / invalid "
          "| calibrated yes / no / unknown / invalid |")
    print("|---|---|---|---|---|---|---|")
    for source in args.sources.split(","):
        group = [t for t in tests if t["source"] == source]
        if not group:
            continue
        for mode in MODES:
            texts = [shown(t, mode) for t in group]
            changed = sum(x != t["text"] for x, t in zip(texts, group, strict=True))
            kept = sum(favoured_word_kept(t, x) for x, t in zip(texts, group, strict=True))
            n = len(group)
            cells = []
            for table in (verdicts, calibrated):
                mix = Counter(table[(t["context"], x, t["labels"])] for x, t in zip(texts, group, strict=True))
                cells.append(" / ".join(f"{mix[v] / n:.2f}" for v in ("yes", "no", "unknown", "invalid")))
            print(f"| {source} | {n} | {mode} | {changed / n:.2f} ({changed}) | {kept / n:.2f} ({kept}) | "
                  f"{cells[0]} | {cells[1]} |")
        differ = sum(shown(t, "answers") != shown(t, "inflections") for t in group)
        flips = [sum(table[(t["context"], shown(t, "answers"), t["labels"])]
                     != table[(t["context"], shown(t, "inflections"), t["labels"])] for t in group)
                 for table in (verdicts, calibrated)]
        print(f"| {source} | {len(group)} | answers vs inflections | {differ} tests differ | | "
              f"{flips[0]} verdicts differ | {flips[1]} verdicts differ |")
    examples = [t for t in tests if shown(t, "answers") != shown(t, "inflections")][:6]
    if examples:
        print("\nexamples (answers | inflections):")
        for t in examples:
            print(f"- {shown(t, 'answers')}\n  {shown(t, 'inflections')}")
    print(f"\n{verifier.stats.requests} verifier requests; {time.perf_counter() - start:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
