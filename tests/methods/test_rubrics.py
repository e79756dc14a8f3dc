"""Rubric rewards (RaR, RLER): DR Tulu's Eq. 1, judge scores halved, pruning, buffers across steps and processes."""

import json
import re

import pytest
from fakes import ScriptedVerifier

from rlce_trl.methods import RubricScorer, rubric_score
from rlce_trl.methods.baseline_prompts import parse_rubric_score, parse_rubrics
from rlce_trl.methods.rubrics import population_std, prune
from rlce_trl.scoring import Group

LABELS = ("positive", "negative")
SMILE, FROWN = "\\boxed{positive} The speaker smiles.", "\\boxed{negative} The speaker frowns."
SEED = [("mentions the smile", "positive"), ("cites the tone of voice", "positive"), ("invents facts", "negative")]
# judge score (0/1/2) of each rubric for each response
SCORES = {
    "mentions the smile": {SMILE: 2, FROWN: 0},
    "cites the tone of voice": {SMILE: 1, FROWN: 1},
    "invents facts": {SMILE: 0, FROWN: 2},
    "names a label": {SMILE: 2, FROWN: 2},
    "contradicts itself": {SMILE: 0, FROWN: 1},
}


def as_json(rubrics):
    return json.dumps({"rubrics": [{"criterion": c, "type": t} for c, t in rubrics]})


def rubric_verifier(new=()):
    def reply(request):
        content = request.messages[-1]["content"]
        if request.stage == "rubric_seed":
            return as_json(SEED)
        if request.stage == "rubric_generation":
            return as_json(new)
        if request.stage == "rubric_judge":
            rubric = re.search(r"Criterion: (.*)\n", content).group(1)
            response = content.split("Response:\n")[1].split("\n\n### Task")[0]
            return str(SCORES[rubric][response])
        raise AssertionError(request.stage)

    return ScriptedVerifier(reply)


# (weights, judgments, S) -- S = sum w J / max(sum positive w, 1)
RUBRIC_SCORE_VECTORS = [
    ([1, 1, -1], [1.0, 0.5, 0.0], 0.75),
    ([1, 1, -1], [0.0, 0.5, 1.0], -0.25),
    ([1, 1, -1, 1, -1], [1.0, 0.5, 0.0, 1.0, 0.0], 2.5 / 3),
    ([-1, -1], [1.0, 0.5], -1.5),  # no positive weight: denominator 1, not clamped
    ([1], [0.5], 0.5),
    ([], [], 0.0),
]


@pytest.mark.parametrize("weights,judgments,expected", RUBRIC_SCORE_VECTORS)
def test_rubric_score(weights, judgments, expected):
    assert rubric_score(weights, judgments) == pytest.approx(expected)


def test_static_rubrics_seed_once_then_judge_only():
    group = Group("c1", [SMILE, FROWN, SMILE, ""], labels=LABELS, key="c1")
    verifier = rubric_verifier()
    scorer = RubricScorer(verifier, evolving=False)
    (r,), stats = scorer.score([group])
    assert [b[0].stage for b in verifier.batches] == ["rubric_seed", "rubric_judge"]
    assert len(verifier.batches[1]) == 2 * 3  # 2 distinct non-empty responses x 3 rubrics; "" scores 0, no call
    assert r.verified == pytest.approx([0.75, -0.25, 0.75, 0.0]) and r.status == "scored"
    assert r.verified_answer == "positive" and r.scores == pytest.approx([0.75, -0.25])
    assert stats.tests_built == 3 and stats.verdicts == {"score_0": 2, "score_1": 2, "score_2": 2}
    judge = verifier.batches[1][0]
    assert judge.choices == ("0", "1", "2") and judge.sampling.greedy
    assert "positive" not in judge.messages[-1]["content"].split("Criterion:")[1]  # the sign is never shown

    (again,), stats = scorer.score([group])
    assert [b[0].stage for b in verifier.batches[2:]] == ["rubric_judge"] and stats.extra["static_cache_hits"] == 1
    assert again.verified == r.verified
    assert scorer.pop_state_updates() == [{"key": "c1", "persistent": [
        {"text": "mentions the smile", "weight": 1}, {"text": "cites the tone of voice", "weight": 1},
        {"text": "invents facts", "weight": -1}]}]


def test_evolving_rubrics_generate_judge_and_prune():
    group = Group("c1", [SMILE, FROWN, SMILE, FROWN], labels=LABELS, key="c1")
    verifier = rubric_verifier(new=[("names a label", "positive"), ("contradicts itself", "negative")])
    scorer = RubricScorer(verifier, evolving=True)
    (r,), _ = scorer.score([group])
    assert [b[0].stage for b in verifier.batches] == ["rubric_seed", "rubric_generation", "rubric_judge"]
    # positives: 2 seed + "names a label" = 3; smile: (1 + .5 - 0 + 1 - 0)/3; frown: (0 + .5 - 1 + 1 - .5)/3
    assert r.verified == pytest.approx([2.5 / 3, 0.0, 2.5 / 3, 0.0])
    buffer = scorer.buffers["c1"]
    # "names a label" scored 1 for every rollout (std 0): archived; "contradicts itself" separates them: active
    assert buffer["active"] == [{"text": "contradicts itself", "weight": -1}]
    assert buffer["archived"] == [{"text": "names a label", "weight": 1}]
    generation = verifier.batches[1][0].messages[-1]["content"]
    assert "[negative] invents facts" in generation and "Response 4:" in generation

    # next visit: the active rubric is judged (and shown to the generator), a proposal repeating it is dropped
    verifier.reply = rubric_verifier(new=[("contradicts itself", "negative")]).reply
    (r2,), stats = scorer.score([group])
    assert stats.tests_built == 0
    assert r2.verified == pytest.approx([1.5 / 2, -1.0 / 2, 1.5 / 2, -1.0 / 2])
    assert scorer.buffers["c1"]["active"] == [{"text": "contradicts itself", "weight": -1}]


def test_prune_keeps_top_five_by_std_and_archives_the_rest():
    candidates = [{"text": f"r{k}", "weight": 1} for k in range(8)]
    stds = [0.1, 0.0, 0.5, 0.3, 0.3, 0.2, 0.4, 0.05]
    active, archived = prune(candidates, stds, keep=5)
    assert [r["text"] for r in active] == ["r2", "r6", "r3", "r4", "r5"]  # ties (r3, r4) keep their order
    assert [r["text"] for r in archived] == ["r0", "r1", "r7"]
    assert population_std([0.0, 0.5, 0.0, 0.5]) == pytest.approx(0.25)


def test_state_updates_move_between_processes_and_checkpoints():
    group = Group("c1", [SMILE, FROWN], labels=LABELS)
    owner = RubricScorer(rubric_verifier(new=[("contradicts itself", "negative")]), evolving=True)
    owner.score([group])
    updates = owner.pop_state_updates()
    assert owner.pop_state_updates() == []
    json.dumps(updates)  # JSON-able

    other_verifier = rubric_verifier()
    other = RubricScorer(other_verifier, evolving=True)
    other.apply_state_updates(updates)
    assert other.buffers == owner.buffers
    other.score([group])
    assert "rubric_seed" not in {b[0].stage for b in other_verifier.batches}  # seeded elsewhere

    restored = RubricScorer(rubric_verifier(), evolving=True)
    restored.load_state_dict(json.loads(json.dumps(owner.state_dict())))
    assert restored.buffers == owner.buffers


def test_failed_seed_gives_no_reward_and_is_retried():
    verifier = ScriptedVerifier(lambda request: "I will not write rubrics.")
    scorer = RubricScorer(verifier, evolving=False)
    (r,), stats = scorer.score([Group("c1", [SMILE, FROWN], labels=LABELS)])
    assert r.verified == [None, None] and r.status == "no_rubrics"
    assert stats.construction_failures in ({"seed_empty": 1}, {"seed_malformed_json": 1})
    scorer.score([Group("c1", [SMILE, FROWN], labels=LABELS)])
    assert [b[0].stage for b in verifier.batches] == ["rubric_seed", "rubric_seed"]


def test_unreadable_judge_score_counts_zero():
    def reply(request):
        return as_json(SEED[:1]) if request.stage == "rubric_seed" else "excellent"

    (r,), stats = RubricScorer(ScriptedVerifier(reply), evolving=False).score([Group("c", [SMILE, FROWN])])
    assert r.verified == [0.0, 0.0] and stats.verdicts == {"invalid": 2}


@pytest.mark.parametrize("text,expected", [
    ("2", 2), ("Score: 1", 1), ('{"score": 0}', 0), ("1.5", None), ("10", None), ("great", None),
])
def test_parse_rubric_score(text, expected):
    assert parse_rubric_score(text) == expected


def test_parse_rubrics_forms():
    assert parse_rubrics('[{"description": "a", "weight": -1}, {"criterion": "b"}]', 5)[0] == [
        {"text": "a", "weight": -1}, {"text": "b", "weight": 1}]
    assert parse_rubrics("- [negative] vague\n- [positive] cites cue", 5)[0] == [
        {"text": "vague", "weight": -1}, {"text": "cites cue", "weight": 1}]
    assert parse_rubrics('{"rubrics": []}', 5) == ([], None)  # an empty proposal is valid
    assert parse_rubrics('{"rubrics": [', 5) == ([], "malformed_json")
    assert len(parse_rubrics(as_json([(f"c{k}", "positive") for k in range(7)]), 5)[0]) == 5


# -- D.3's format term, policy prompt and judge question (issue 26) ---------------------------------------------------
def test_rubric_format_is_an_answer_tag_with_one_label_and_a_justification():
    from rlce_trl.methods.rubrics import rubric_format, rubric_format_ok

    labels = ("positive", "negative", "not humour")
    ok = "<answer>Positive</answer>\n<justification>The speaker smiles and says she loved it.</justification>"
    assert rubric_format_ok(ok, labels)
    assert not rubric_format_ok("<answer>positive</answer>", labels)  # no justification
    assert not rubric_format_ok("<answer>positive</answer><justification> </justification>", labels)
    assert not rubric_format_ok("<answer>happy</answer><justification>She smiles.</justification>", labels)
    assert not rubric_format_ok("<answer>positive or negative</answer><justification>x</justification>", labels)
    assert not rubric_format_ok("<answer>positive</answer><answer>negative</answer><justification>x</justification>",
                                labels)
    assert not rubric_format_ok("Reasoning... \\boxed{positive}", labels)  # RLCE's format is not D.3's
    assert rubric_format_ok("<answer>To leave early.</answer><justification>He checks the clock.</justification>")
    assert rubric_format([ok, "\\boxed{positive}", [{"role": "assistant", "content": ok}]],
                         answer_options=[labels, labels, []]) == [1.0, 0.0, 1.0]


def test_rubric_rows_ask_for_the_answer_tag_and_a_justification():
    from rlce_trl.data.prompts import SOLVER_SYSTEM_PROMPT
    from rlce_trl.methods.rubrics import rubric_rows

    rows = [
        {"prompt": [{"role": "system", "content": [{"type": "text", "text": SOLVER_SYSTEM_PROMPT}]},
                    {"role": "user", "content": [{"type": "video", "text": None}, {"type": "text", "text": "q"}]}],
         "answer_options": ["humour", "not humour"], "id": "a"},
        {"prompt": [{"role": "user", "content": "I am vegan. What should I cook?"}], "answer_options": [], "id": "b"},
    ]
    video, text = rubric_rows(rows)
    system = video["prompt"][0]["content"][0]["text"]
    assert "\\boxed" not in system and "<answer></answer>" in system and "<justification></justification>" in system
    assert ("Answer with exactly one of: humour, not humour, and support the answer with 1 to 3 sentences of "
            "evidence from the clip.") in system
    assert text["prompt"][0]["role"] == "system" and "Answer in one short sentence" in text["prompt"][0]["content"]
    assert "evidence from the input" in text["prompt"][0]["content"] and text["prompt"][1] == rows[1]["prompt"][0]
    assert rows[0]["prompt"][0]["content"][0]["text"] == SOLVER_SYSTEM_PROMPT  # the input rows are not changed


def test_the_rubric_methods_bring_their_format_term_and_prompt_and_the_others_do_not():
    from rlce_trl import RLCEGRPOTrainer
    from rlce_trl.methods import method_hook
    from rlce_trl.methods.rubrics import rubric_format, rubric_rows
    from rlce_trl.rewards import rlce_format
    from rlce_trl.training.pipeline import method_rows

    for name in ("rar", "rler"):
        assert RLCEGRPOTrainer._format_reward(None, name) is rubric_format
        assert method_hook(name, "policy_rows") is rubric_rows
    for name in ("rlce", "rlce_static", "usc", "policy_judge", "ttrl"):
        assert RLCEGRPOTrainer._format_reward(None, name) is rlce_format and method_hook(name, "policy_rows") is None
    rows = [{"prompt": [{"role": "user", "content": "q"}], "answer_options": []}]
    assert method_rows(rows, "rlce") is rows and method_rows(rows, "rar")[0]["prompt"][0]["role"] == "system"


def test_the_rubric_judge_reads_the_datasets_one_question_not_the_rows():
    from rlce_trl.data.hba import MOSEI_LABELS

    verifier = ScriptedVerifier(lambda request: "2")
    seeded = {"persistent": [{"text": "Cites the speaker.", "weight": 1}], "active": [], "archived": []}
    scorer = RubricScorer(verifier, evolving=False, buffers={"a": seeded, "b": seeded})
    groups = [Group("User: Transcript: I loved it. What is the sentiment?", ["x"], labels=MOSEI_LABELS, key="a",
                    question="Transcript: I loved it. What is the sentiment?"),
              Group("User: Transcript: awful. What is the sentiment?", ["y"], labels=MOSEI_LABELS, key="b")]
    scorer.score(groups)
    questions = {r.messages[-1]["content"].split("\n\nResponse:")[0] for r in verifier.batches[-1]}
    expected = ("### Input\nQuestion: What is the sentiment of the speaker in this video? Answer with exactly one of: "
                + ", ".join(MOSEI_LABELS) + ", and support the answer with 1 to 3 sentences of evidence from the "
                "input.")
    assert questions == {expected}
