"""Golden rewards: every reward method of the registry, the Elect rewards and election, and `RLCEReward`, on fixed
scripted-verifier steps (ScriptedVerifier is a FAKE backend: the test chooses its replies), compared with the values
recorded in `golden_rewards.json`.

It pins behaviour across refactors: a change that alters a reward, a status or a step metric fails here with the
method and the key named. When a change is MEANT to alter rewards, regenerate the file and say why in CHANGELOG.md:

    python tests/golden/test_golden_rewards.py --regenerate

Covered: `rlce` in each `rlce_mode` (two steps, so static tests are reused), usc, policy_judge, ttrl, rar and rler
(two steps: seeded and evolved rubric buffers), rlac_generator (with and without a partner), rlac_critic,
visplay_questioner, visplay_reasoner, vz_questioner (and a partner that is down), vz_solver; a test fails when the
registry gains a method this file does not drive. Groups cover a clear winner, a tie, no winner, a single distinct
answer, rollouts without an answer, closed labels and free text (equivalent answers merged). Then `RLCEReward` (the
`rlce/*` metrics and completions columns it logs), the five Elect rewards with the paper's weights (gold and no
gate), and the election (`elect`, `should_stop`, `apply_referee`, `run_election`: early stop, growth to K_max,
referee flips with and without a sample left). Only import paths that stay across the layout change are used.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import sys
from collections import Counter
from pathlib import Path

try:
    from fakes import ScriptedVerifier, evidence_verifier
except ModuleNotFoundError:  # run as a script: run again under pytest, whose configuration puts tests/ on the path
    if __name__ != "__main__":
        raise
    import pytest

    os.environ["RLCE_GOLDEN_REGENERATE"] = "1" if sys.argv[1:] == ["--regenerate"] else ""
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))

from rlce_trl.elect import (
    PAPER_WEIGHTS,
    Candidate,
    ElectConfig,
    ElectRewardConfig,
    apply_referee,
    elect,
    evidence_score,
    make_elect_reward_funcs,
    parse_elect_output,
    run_election,
    should_stop,
)
from rlce_trl.evidence.pipeline import EvidenceSettings
from rlce_trl.methods import REWARD_METHODS, build_scorer
from rlce_trl.rewards import RLCEReward
from rlce_trl.scoring import Group
from rlce_trl.verifiers.base import Reply

GOLDEN = Path(__file__).with_name("golden_rewards.json")
REGENERATE_ENV = "RLCE_GOLDEN_REGENERATE"
DIGITS = 9
#: keys whose values are timings or otherwise nondeterministic: never recorded
_SKIP_KEY = re.compile(r"second|time|latency|elapsed|duration_s", re.I)

LABELS = ("positive", "negative", "neutral")
PLAIN = EvidenceSettings(redact_answers=False)  # the scripted claims name the answers


def boxed(*answers):
    return [f"Reasoning... \\boxed{{{a}}}" if a is not None else "I am not sure." for a in answers]


# -- canonical JSON ---------------------------------------------------------------------------------------------------
def canon(value):
    """A JSON-able, deterministic form: floats rounded, sets sorted, dataclasses and Counters as dicts, timing keys
    dropped."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return round(value, DIGITS) if value == value and abs(value) != float("inf") else repr(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, (dict, Counter)):
        return {str(k): canon(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))
                if not _SKIP_KEY.search(str(k))}
    if isinstance(value, (set, frozenset)):
        return sorted(canon(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [canon(v) for v in value]
    return repr(value)


def record_step(scorer, groups):
    """One step: `score`, then `finalize_batch` (as the trainer does), results and stats as JSON."""
    results, stats = scorer.score(groups)
    results = scorer.finalize_batch(groups, results)
    metrics = {f"{scorer.name}/{k}": v for k, v in stats.metrics().items()}
    return {
        "results": [canon(r) for r in results],
        "stats": canon({k: v for k, v in vars(stats).items()}),
        "metrics": canon(metrics),
    }


def run_method(name, verifier, groups, steps=2, partner=None, settings=PLAIN, **kwargs):
    """`steps` steps of the same groups (the second shows state kept across steps: static tests, rubric buffers)."""
    scorer = build_scorer(name, verifier, settings, partner=partner, **kwargs)
    out = {"scorer_name": scorer.name, "steps": [record_step(scorer, groups) for _ in range(steps)]}
    out["state"] = canon(scorer.state_dict())
    return out


# -- RLCE (every mode) and the evidence-based baselines --------------------------------------------------------------
RLCE_VERDICTS = {
    "positive>negative": "yes", "negative>positive": "no",  # a clear winner
    "neutral>negative": "yes", "negative>neutral": "yes",  # both hold: a tie
    "the cafe>a bar": "yes", "a bar>the cafe": "no",
    "positive+": "yes", "negative+": "no", "neutral+": "yes", "the cafe+": "yes", "a bar+": "unknown",
    "alpha+": "yes",
}
RLCE_EQUIVALENT = {"the cafe=a cafe", "a cafe=the cafe"}


def rlce_groups():
    return [
        Group("User: clip 1\nHow does the speaker feel?", boxed("positive", "negative", "Positive", None),
              labels=LABELS, key="win"),
        Group("User: clip 2", boxed("neutral", "negative", "neutral", "negative"), labels=LABELS, key="tie"),
        Group("User: where to eat?", boxed("the cafe", "a cafe", "a bar", "a bar"), key="free"),
        Group("User: pick one", boxed("alpha", "beta", "gamma", "alpha"), key="no_winner"),
        Group("User: a single answer", boxed("alpha", "alpha", "alpha", None), key="single"),
        Group("User: nothing", ["I am not sure.", "No idea at all."], labels=LABELS, key="no_answer"),
    ]


def golden_rlce():
    return {
        f"rlce[{mode}]": run_method("rlce", evidence_verifier(RLCE_VERDICTS, RLCE_EQUIVALENT), rlce_groups(),
                                    settings=dataclasses.replace(PLAIN, mode=mode))
        for mode in ("evolving", "static", "pointwise")
    }


def golden_usc():
    def reply(request):
        text = request.messages[-1]["content"]
        if "UNDECIDED" in text:
            return "I cannot decide."
        return request.choices[-1] if request.choices else "1"

    groups = [
        Group("User: where?", ["Try \\boxed{Le Potager}", "Try \\boxed{Le Steak}", "Try \\boxed{Le Potager}", "Hmm"],
              question="Where should I eat tonight?"),
        Group("User: which?", ["Go to \\boxed{A}", "Go to \\boxed{B}", "I'd say \\boxed{A}", "Go to \\boxed{A}"]),
        Group("User: UNDECIDED", ["\\boxed{A}", "\\boxed{B}"], question="UNDECIDED question"),
        Group("User: same", ["\\boxed{A}", " \\boxed{A}", "no idea", "\\boxed{A}"]),
        Group("User: closed", boxed("positive", "negative", "positive", None), labels=LABELS),
        Group("User: closed tie", boxed("positive", "negative", "neutral", None), labels=LABELS),
        Group("User: nothing", ["no", "idea"]),
    ]
    return {"usc": run_method("usc", ScriptedVerifier(reply), groups, steps=1)}


JUDGED = re.compile(r"Proposed (?:answer|response) to the final request in the input:[ \n](.*)\n")
JUDGE_REPLIES = {"positive": "Yes", "negative": "No.", "a cafe": "**No**", "a bar": "yes", "a park": "maybe",
                 "alpha": "Yes", "beta": "Yes"}


def golden_policy_judge():
    def reply(request):
        judged = JUDGED.search(request.messages[-1]["content"]).group(1)  # an answer, or a free-text response
        return JUDGE_REPLIES.get(re.sub(r"^\\boxed\{(.*)\}$", r"\1", judged), "maybe")

    groups = [
        Group("User: clip\nOptions: positive, negative, neutral.", boxed("positive", "negative", "Positive", None),
              labels=LABELS),
        Group("User: clip 2", ["\\boxed{a cafe}", "\\boxed{A cafe.}", "\\boxed{a bar}", "\\boxed{a park}"]),
        Group("User: tie", boxed("alpha", "beta", "alpha", "beta")),
        Group("User: single", boxed("negative", "negative"), labels=LABELS),
        Group("User: nothing", ["no", "idea"]),
    ]
    return {"policy_judge": run_method("policy_judge", ScriptedVerifier(reply), groups, steps=1)}


def golden_ttrl():
    def reply(request):
        raise AssertionError(f"ttrl makes no call ({request.stage})")

    groups = [
        Group("c1", boxed("positive", "negative", "positive", None), labels=LABELS),
        Group("c2", boxed("positive", "negative"), labels=LABELS),  # a tie
        Group("c3", boxed("A quiet cafe.", "a quiet  cafe", "a loud bar", None)),  # free text
        Group("c4", boxed("alpha", "alpha")),
        Group("c5", ["nothing", "at all"]),
    ]
    return {"ttrl": run_method("ttrl", ScriptedVerifier(reply), groups, steps=1)}


SMILE, FROWN = "\\boxed{positive} The speaker smiles.", "\\boxed{negative} The speaker frowns."
SEED = [("mentions the smile", "positive"), ("cites the tone of voice", "positive"), ("invents facts", "negative")]
NEW = [("names a label", "positive"), ("contradicts itself", "negative")]
RUBRIC_SCORES = {
    "mentions the smile": {SMILE: 2, FROWN: 0},
    "cites the tone of voice": {SMILE: 1, FROWN: 1},
    "invents facts": {SMILE: 0, FROWN: 2},
    "names a label": {SMILE: 2, FROWN: 2},
    "contradicts itself": {SMILE: 0, FROWN: 1},
}


def rubric_verifier():
    def as_json(rubrics):
        return json.dumps({"rubrics": [{"criterion": c, "type": t} for c, t in rubrics]})

    def reply(request):
        content = request.messages[-1]["content"]
        if request.stage == "rubric_seed":
            return as_json(SEED)
        if request.stage == "rubric_generation":
            return as_json(NEW)
        if request.stage == "rubric_judge":
            rubric = re.search(r"Criterion: (.*)\n", content).group(1)
            response = content.split("Response:\n")[1].split("\n\n### Task")[0]
            return str(RUBRIC_SCORES.get(rubric, {}).get(response, "unreadable"))
        raise AssertionError(request.stage)

    return ScriptedVerifier(reply)


def rubric_groups():
    return [
        Group("c1", [SMILE, FROWN, SMILE, ""], labels=("positive", "negative"), key="c1"),
        Group("c2", [SMILE, FROWN, SMILE, FROWN], labels=("positive", "negative"), key="c2"),
        Group("c3", [SMILE, SMILE], key="c3"),  # one distinct response
        Group("c4", [SMILE, "The speaker is unreadable."], key="c4"),  # an unreadable judgment
    ]


def golden_rubrics():
    return {name: run_method(name, rubric_verifier(), rubric_groups()) for name in ("rar", "rler")}


# -- co-evolution scorers ---------------------------------------------------------------------------------------------
RLAC_CONTEXT = "User: I get seasick.\n\nUser: How do I get between the islands?"


def rlac_scripted(critic, meta, validate):
    def reply(request):
        text = request.messages[-1]["content"]
        if request.stage == "rlac_critic":
            return next((v for k, v in critic.items() if k in text), "I cannot find anything.")
        claim = text.split("Claim: " if request.stage == "rlac_meta" else "Statement: ")[1].split("\n")[0]
        return (meta if request.stage == "rlac_meta" else validate).get(claim, "maybe")

    return ScriptedVerifier(reply)


def golden_rlac():
    responses = [
        "<answer>Fly</answer><justification>Flights avoid boats.</justification>",
        "<answer>Ferry</answer><justification>The user loves boats.</justification>",
        "Take the ferry.",
        "<answer>Ferry</answer><justification>Cheap.</justification>",
    ]
    critic = {
        "Flights avoid boats": "SPAN: Flights avoid boats\nCLAIM: Flights avoid boats\nWHY: w",
        "loves boats": "SPAN: The user loves boats\nCLAIM: The user enjoys being on boats\nWHY: w",
        "Take the ferry.": "SPAN: ferries are fast\nCLAIM: ferries are fast\nWHY: w",
        "Cheap.": "I cannot find anything.",
    }
    validate = {"Flights avoid boats": "No", "The user enjoys being on boats": "Yes", "The user loves boats": "No"}
    meta = {"The user enjoys being on boats": "Yes"}
    generator_groups = [
        Group(RLAC_CONTEXT, responses),
        Group(RLAC_CONTEXT, ["<answer>Fly</answer><justification>x</justification>"] * 2),  # no verdict at all
    ]
    response = "<answer>Ferry</answer><justification>The user loves boats.</justification>"
    critiques = [
        "SPAN: The user loves boats\nCLAIM: The user loves boats\nWHY: seasick",
        "SPAN: The user loves boats\nCLAIM: The user loves boats",
        "SPAN: the user hates planes\nCLAIM: the user hates planes\nWHY: w",
        "nothing to say",
    ]
    critic_groups = [
        Group("critic prompt", critiques, columns={"rlac_response": response, "rlac_context": RLAC_CONTEXT}),
        Group("critic prompt 2", critiques[2:], columns={"rlac_response": response, "rlac_context": RLAC_CONTEXT}),
    ]
    return {
        "rlac_generator": run_method("rlac_generator", rlac_scripted({}, meta, validate), generator_groups, steps=1,
                                     partner=rlac_scripted(critic, {}, {})),
        "rlac_generator[no partner]": run_method("rlac_generator", rlac_scripted(critic, meta, validate),
                                                 generator_groups, steps=1),
        "rlac_critic": run_method("rlac_critic", rlac_scripted({}, meta, validate), critic_groups, steps=1),
    }


def block(q, kind="multiple choice", answer="yes"):
    return f"<type>{kind}</type>\n<question>{q}</question>\n<answer>{answer}</answer>"


def golden_visplay():
    def reasoner(request):
        user = request.messages[-1]["content"]
        n = request.sampling.n
        if "HALF" in user:
            return ["\\boxed{yes}"] * (n // 2) + ["\\boxed{no}"] * (n - n // 2)
        if "EASY" in user:
            return "\\boxed{yes}"
        if "THIRDS" in user:
            return ["\\boxed{positive}"] * 7 + ["\\boxed{negative}"] * (n - 7)
        return "I would rather not say."

    context = "User: Transcript: I love boats.\n\nUser: Ask a question about the clip."
    questioner_groups = [
        Group(context, [block("Is the user HALF sure about boats?"), block("Is this EASY?"), "garbage",
                        block("Is it NOBOX?")]),
        Group(context, [block("Is the user HALF sure about boats?"), block("Does the user like HALF measures?"), "",
                        "<type>x"]),
        Group(context, [block("How does the speaker feel, THIRDS?", answer="positive"), block("Is this EASY?")],
              labels=LABELS),
    ]
    reasoner_groups = [
        Group("q1", ["\\boxed{Positive}", "It is \\boxed{positive}.", "\\boxed{negative}", "no idea"], labels=LABELS,
              columns={"pseudo_label": "positive"}),
        Group("q2", ["\\boxed{To save money.}", "\\boxed{to spend}"], columns={"pseudo_label": "to save money"}),
        Group("q3", ["\\boxed{a}", "\\boxed{b}"], columns={"pseudo_label": None}),  # no pseudo-label: no reward
    ]
    no_call = ScriptedVerifier(lambda request: (_ for _ in ()).throw(AssertionError("no call expected")))
    return {
        "visplay_questioner": run_method("visplay_questioner", no_call, questioner_groups, steps=1,
                                         partner=ScriptedVerifier(reasoner)),
        "visplay_reasoner": run_method("visplay_reasoner", no_call, reasoner_groups, steps=1),
    }


VZ_CLIP = [{"type": "video", "source": {"path": "/clips/a.mp4"}, "metadata": {"duration": 30.0}}]


def vz_tags(question, answer="positive", span="10 to 20 seconds", evidence="The speaker smiles, then laughs."):
    return (f"<span>{span}</span>\n<evidence>{evidence}</evidence>\n<question>{question}</question>\n"
            f"<answer>{answer}</answer>")


class _DownVerifier(ScriptedVerifier):
    """A FAKE backend whose every request fails (a partner that is down)."""

    def _generate(self, requests):
        self.batches.append(requests)
        return [Reply.failed(r.sampling.n, "down") for r in requests]


def golden_video_zero():
    def solver(request):
        text = request.messages[-1]["content"]
        blind = "Q-A" in text and "Transcript" not in text
        if "Q-A" in text:
            return ["\\boxed{positive}"] * (2 if blind else 4) + ["\\boxed{negative}"] * (3 if blind else 1)
        if "Q-C" in text:
            return ["\\boxed{by train}"] * 3 + ["\\boxed{by bus}"] * 2
        return "\\boxed{positive}"

    video_group = Group(context="User: Transcript: hi\n\nUser: Ask about the clip.", labels=("positive", "negative"),
                        media=VZ_CLIP, completions=[vz_tags("Q-A"), vz_tags("Q-B", answer="happy", span="none"),
                                                    "garbage"])
    text_group = Group(context="User: Where do I go?", completions=[
        "<question>Q-C</question><answer>By train.</answer>", "<question>Q-C</question>"])
    solver_groups = [
        Group("s1", ["<span>12 to 18 seconds</span> \\boxed{positive}", "<span>18-12</span> \\boxed{positive}",
                     "\\boxed{negative}", "nothing"], labels=("positive", "negative"),
              columns={"pseudo_label": "positive", "target_span": [10, 20], "clip_seconds": 30.0}),
        Group("s2", ["\\boxed{by train}", "\\boxed{by bus}"],
              columns={"pseudo_label": "by train", "target_span": None, "clip_seconds": None}),
        Group("s3", ["\\boxed{x}", "\\boxed{y}"], columns={"pseudo_label": None}),
    ]
    no_call = ScriptedVerifier(lambda request: (_ for _ in ()).throw(AssertionError("no call expected")))
    return {
        "vz_questioner": run_method("vz_questioner", no_call, [video_group, text_group], steps=1,
                                    partner=ScriptedVerifier(solver)),
        "vz_questioner[partner down]": run_method("vz_questioner", _DownVerifier(None), [video_group], steps=1,
                                                  m=3, m_blind=2),
        "vz_solver": run_method("vz_solver", no_call, solver_groups, steps=1),
    }


# -- the trainer-level reward function, Elect -------------------------------------------------------------------------
def golden_rlce_reward():
    reward = RLCEReward(evidence_verifier(RLCE_VERDICTS, RLCE_EQUIVALENT), num_generations=4, settings=PLAIN)
    prompts = [[{"role": "user", "content": "How does the speaker feel?"}]] * 4 + ["Where should I eat?"] * 4
    completions = [[{"role": "assistant", "content": c}] for c in boxed("positive", "negative", "positive", None)]
    completions += boxed("the cafe", "a cafe", "a bar", "a bar")
    metrics, extra = {}, {}
    rewards = reward(prompts, completions, log_metric=metrics.__setitem__,
                     log_extra=lambda name, values: extra.setdefault(name, values),
                     answer_options=[list(LABELS)] * 4 + [None] * 4)
    return {"RLCEReward": canon({"rewards": rewards, "metrics": metrics, "columns": extra})}


def elect_output(answer="B", frames="2, 4", think_words=544, order=("think", "keyframes", "answer")):
    fields = {"think": " ".join(f"w{i}" for i in range(think_words)), "keyframes": frames, "answer": answer}
    return "".join(f"<{t}>{fields[t]}</{t}>" for t in order)


ELECT_COMPLETIONS = [
    elect_output(frames="1,2,3,4,5,6,7,8"),
    elect_output("A", "2, 4, 4, 99", 304),
    elect_output(order=("answer", "keyframes", "think")),
    elect_output(frames="", think_words=20),
    "<think>" + "x y z " * 200 + "</think>",
    "no tags, the answer is \\boxed{A}",
]


def golden_elect():
    out = {}
    for gate in ("gold", "none"):
        funcs, weights = make_elect_reward_funcs(ElectRewardConfig(gate=gate))
        n = len(ELECT_COMPLETIONS)
        columns = {"solution": ["B"] * (n - 1) + [None], "num_frames": [8] * (n - 2) + [None, 8],
                   "answer_options": [["A", "B"]] * n}
        values = {f.__name__: f(prompts=[None] * n, completions=ELECT_COMPLETIONS, **columns) for f in funcs}
        totals = [sum(w * (v[i] or 0.0) for w, v in zip(weights, values.values(), strict=True)) for i in range(n)]
        out[f"elect_rewards[gate={gate}]"] = canon({"weights": weights, "values": values, "totals": totals})
    out["elect_rewards[paper_weights]"] = canon(PAPER_WEIGHTS)

    confidences = [0.9, 0.6, None, 0.3, 0.8, 0.5]
    candidates = []
    for text, conf in zip(ELECT_COMPLETIONS, confidences, strict=True):
        parse = parse_elect_output(text, 8, ["A", "B"])
        candidates.append(Candidate(parse.answer, parse.keyframes, evidence_score(parse, conf), conf,
                                    parse.format_ok))
    elections = {}
    for label, cfg in [("paper", ElectConfig()), ("noframes", ElectConfig(use_frames=False)),
                       ("trim_none", ElectConfig(trim="none"))]:
        result = elect(candidates, cfg)
        elections[label] = {"election": result, "stop": should_stop(result, cfg.delta, cfg.gamma),
                            "referee_-0.5": apply_referee(result, -0.5), "referee_0": apply_referee(result, 0.0)}
    elections["no_schema"] = {"election": elect([Candidate("A", has_schema=False), Candidate("B", has_schema=False),
                                                 Candidate("A", has_schema=False)])}
    elections["no_answer"] = {"election": elect([Candidate(None), Candidate(None)])}
    loops = {}
    for label, cfg, referee, pool in [
        ("stops_early", ElectConfig(k_init=2), None, 6),
        ("grows_to_k_max", ElectConfig(k_init=2, gamma=0.95), None, 6),
        ("referee_flip_redraws", ElectConfig(k_init=2), lambda e: -10.0, 6),
        ("referee_flip_no_sample_left", ElectConfig(k_init=2), lambda e: -10.0, 2),
        ("referee_keeps_leader", ElectConfig(k_init=2), lambda e: 0.0, 6),
    ]:
        loops[label] = run_election(lambda i, pool=pool: candidates[i] if i < pool else None, cfg, referee=referee)
    out["election"] = canon({"elections": elections, "run_election": loops})
    return out


# -- the golden record ------------------------------------------------------------------------------------------------
SECTIONS = [golden_rlce, golden_usc, golden_policy_judge, golden_ttrl, golden_rubrics, golden_rlac, golden_visplay,
            golden_video_zero, golden_rlce_reward, golden_elect]


def compute() -> dict:
    random.seed(0)
    record = {}
    for section in SECTIONS:
        record.update(section())
    return json.loads(json.dumps(record, sort_keys=True))  # tuples -> lists, as read back from the file


def diff(expected, actual, path="") -> list[str]:
    """Readable differences: `method / key...: expected X, got Y`."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        lines = []
        for key in sorted(set(expected) | set(actual)):
            where = f"{path} / {key}" if path else key
            if key not in actual:
                lines.append(f"{where}: missing (expected {json.dumps(expected[key])[:200]})")
            elif key not in expected:
                lines.append(f"{where}: new (got {json.dumps(actual[key])[:200]})")
            else:
                lines += diff(expected[key], actual[key], where)
        return lines
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [line for i, (e, a) in enumerate(zip(expected, actual, strict=True))
                for line in diff(e, a, f"{path}[{i}]")]
    if expected != actual:
        return [f"{path}: expected {json.dumps(expected)[:200]}, got {json.dumps(actual)[:200]}"]
    return []


def test_every_registered_method_is_covered():
    record = compute()
    assert record == compute()  # deterministic within a process too (state is per scorer, not global)
    covered = {key.split("[")[0] for key in record}
    assert set(REWARD_METHODS) <= covered, f"add golden steps for {sorted(set(REWARD_METHODS) - covered)}"


def test_golden_rewards_unchanged():
    actual = compute()
    if os.environ.get(REGENERATE_ENV):
        GOLDEN.write_text(json.dumps(actual, indent=1, sort_keys=True) + "\n")
    assert GOLDEN.exists(), "no golden file: run python tests/golden/test_golden_rewards.py --regenerate"
    expected = json.loads(GOLDEN.read_text())
    lines = diff(expected, actual)
    assert not lines, (
        f"{len(lines)} golden value(s) changed (regenerate with python tests/golden/test_golden_rewards.py "
        "--regenerate only if the change is meant, with a CHANGELOG entry):\n  " + "\n  ".join(lines[:40])
    )


if __name__ == "__main__":  # with tests/ already on the path
    import pytest

    os.environ[REGENERATE_ENV] = "1" if sys.argv[1:] == ["--regenerate"] else ""
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
