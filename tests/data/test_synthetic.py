"""The numbered-evidence task: seeded, gold answer and gold evidence consistent with the shown sentences."""

import re

import pytest

from rlce_trl.data.synthetic import evidence_grounding_score, numbered_evidence
from rlce_trl.elect import parse_elect_output


def sentences_of(row):
    found = re.findall(r"^Sentence (\d+): (.*)$", row["prompt"][-1]["content"], re.MULTILINE)
    return {int(i): s for i, s in found}


def test_seeded_and_distinct_seeds_differ():
    assert numbered_evidence(20, seed=3) == numbered_evidence(20, seed=3)
    assert numbered_evidence(20, seed=3) != numbered_evidence(20, seed=4)
    assert numbered_evidence(5, split="train")[0]["id"] == "numbered_evidence-0"


def test_gold_answer_is_stated_by_the_gold_evidence_only():
    rows = numbered_evidence(200, seed=0)
    hops = {r["hops"] for r in rows}
    assert hops == {1, 2} and {len(r["answer_options"]) for r in rows} == {2, 3, 4}
    for row in rows:
        shown = sentences_of(row)
        assert sorted(shown) == list(range(1, row["num_frames"] + 1))
        assert row["gold"] in row["answer_options"] and len(set(row["answer_options"])) == len(row["answer_options"])
        last = shown[row["evidence"][-1]]
        assert last.endswith(f"at the {row['gold']}.")
        # the question's subject appears in the first evidence sentence and nowhere else
        subject = re.search(r"that (\w+) had", row["question"]).group(1)
        assert [i for i, s in shown.items() if re.search(rf"\b{subject}\b", s)] == row["evidence"][:1]
        assert len(row["evidence"]) == row["hops"]


def test_train_rows_hide_gold_unless_supervised():
    (row,) = numbered_evidence(1, split="train")
    assert "gold" not in row and "evidence" not in row and "solution" not in row
    (row,) = numbered_evidence(1, split="train", supervised=True)
    assert row["solution"] in row["answer_options"]


def test_prompt_asks_for_the_elect_schema_or_boxed():
    (row,) = numbered_evidence(1)
    assert "<keyframes></keyframes>" in row["prompt"][0]["content"]
    (row,) = numbered_evidence(1, style="boxed")
    assert "\\boxed{option}" in row["prompt"][0]["content"]


def test_bad_arguments_are_listed_with_the_fix():
    with pytest.raises(ValueError, match="num_sentences=2.*\n.*style='x'"):
        numbered_evidence(1, num_sentences=2, style="x")


def test_evidence_grounding_score():
    parse = parse_elect_output("<keyframes>2, 5, 9</keyframes>", num_frames=8)
    assert evidence_grounding_score(parse.keyframes, parse.invalid, [2, 7]) == pytest.approx(0.5 * (2 / 3 + 1 / 3))
    assert evidence_grounding_score(set(), 0, [1]) == 0.0
