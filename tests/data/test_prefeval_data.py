import json
from collections import Counter

import pytest

from rlce_trl.data import prefeval
from rlce_trl.data.prefeval import (
    EXPLICIT_ACKNOWLEDGEMENT,
    FORMS,
    build_conversation,
    build_prefeval,
    padding_pairs_from_conversations,
    resolve_prefeval_dir,
    split_assignments,
)
from rlce_trl.data.prompts import SOLVER_SYSTEM_PROMPT


def _chars(row):
    return sum(len(m["content"]) for m in row["prompt"][1:])


def test_not_a_checkout_says_how_to_get_one(tmp_path, monkeypatch):
    monkeypatch.delenv("PREFEVAL_DIR", raising=False)
    with pytest.raises(FileNotFoundError, match="git clone https://github.com/amazon-science/PrefEval"):
        resolve_prefeval_dir(tmp_path)
    with pytest.raises(FileNotFoundError, match="PREFEVAL_DIR"):
        resolve_prefeval_dir(None)


def test_env_var_is_used(fake_prefeval, monkeypatch):
    monkeypatch.setenv("PREFEVAL_DIR", str(fake_prefeval))
    assert resolve_prefeval_dir() == fake_prefeval


def test_rows_are_grpo_ready_and_gold_only_outside_train(fake_prefeval):
    built = build_prefeval(fake_prefeval)
    assert set(built) == set(FORMS)
    for form, splits in built.items():
        for split, rows in splits.items():
            for row in rows:
                assert row["task"] == "prefeval" and row["form"] == form
                assert row["answer_options"] == []
                assert row["prompt"][0] == {"role": "system", "content": SOLVER_SYSTEM_PROMPT}
                assert row["prompt"][-1] == {"role": "user", "content": row["question"]}
                roles = [m["role"] for m in row["prompt"][1:]]
                assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"]
                assert ("gold" in row) == (split != "train")
                if split != "train":
                    assert row["gold"].startswith("I never use")
                # the preference itself is never a column the rewards could read
                assert "preference" not in row and "explanation" not in row


def test_form_turns(fake_prefeval):
    built = build_prefeval(fake_prefeval)
    explicit = built["explicit"]["test"][0]["prompt"]
    assert explicit[1]["content"].startswith("I never use") and explicit[2]["content"] == EXPLICIT_ACKNOWLEDGEMENT
    choice = built["choice"]["test"][0]["prompt"]
    assert [m["content"] for m in choice[1:5]][1:] == [
        "1. alpha 2. beta 3. gamma 4. delta",
        "I'll take beta.",
        "Beta it is.",
    ]
    persona = built["persona"]["test"][0]["prompt"]
    assert [m["content"][:2] for m in persona[1:7]] == ["u0", "a0", "u1", "a1", "u2", "a2"]


def test_persona_keys_in_numeric_order():
    record = {"conversation": {str(k): {"user": f"u{k}", "assistant": f"a{k}"} for k in (10, 2, 0, 1, 9)}}
    turns = prefeval.preference_turns("persona", record)
    assert [t["content"] for t in turns[::2]] == ["u0", "u1", "u2", "u9", "u10"]


def test_padding_pool_bounds():
    conversation = [
        {"role": "user", "content": "a" * 30},
        {"role": "assistant", "content": "b" * 29},  # 59: too short
        {"role": "user", "content": "a" * 30},
        {"role": "assistant", "content": "b" * 30},  # 60: kept
        {"role": "user", "content": "a" * 600},
        {"role": "assistant", "content": "b" * 600},  # 1200: kept
        {"role": "user", "content": "a" * 600},
        {"role": "assistant", "content": "b" * 601},  # 1201: too long
    ]
    assert [len(u) + len(a) for u, a in padding_pairs_from_conversations([conversation])] == [60, 1200]


def test_padding_is_seeded_per_pair_and_shared_by_forms(fake_prefeval):
    a, b = build_prefeval(fake_prefeval), build_prefeval(fake_prefeval)
    assert a == b
    c = build_prefeval(fake_prefeval, seed=7)
    assert a != c
    # same padding (the turns after the form's own) in the three forms of one pair
    pads = []
    for form, head in (("explicit", 2), ("choice", 4), ("persona", 6)):
        row = a[form]["train"][0]
        pads.append(row["prompt"][1 + head : -1])
    assert pads[0] == pads[1] == pads[2]
    n_pairs = [(len(r["prompt"]) - 4) // 2 for r in a["explicit"]["train"] + a["explicit"]["test"]]
    assert min(n_pairs) >= 1 and max(n_pairs) <= 10


def test_cap_drops_padding_never_the_preference(tmp_path, prefeval_factory):
    root = prefeval_factory(tmp_path / "big", persona_turns=6, persona_chars=2500)  # ~15k chars on its own
    built = build_prefeval(root)
    for row in built["persona"]["train"]:
        assert len(row["prompt"]) == 1 + 12 + 1  # no padding fits
    for row in built["explicit"]["train"] + built["choice"]["train"]:
        assert _chars(row) <= 13_000
    record = {"preference": "p", "question": "q?"}
    padding = [("u" * 500, "a" * 500)] * 10
    conversation = build_conversation("explicit", record, padding, max_chars=3_000)
    assert sum(len(m["content"]) for m in conversation) <= 3_000
    assert conversation[0]["content"] == "p" and conversation[-1]["content"] == "q?"


def test_split_is_stratified_and_shared(fake_prefeval, fake_topics):
    built = build_prefeval(fake_prefeval)
    keys = {
        form: {split: [r["id"].split("/", 2)[2] for r in rows] for split, rows in s.items()}
        for form, s in built.items()
    }
    assert keys["explicit"] == keys["choice"] == keys["persona"]
    per_topic = Counter((r["topic"], split) for split, rows in built["explicit"].items() for r in rows)
    for topic, n in fake_topics.items():
        assert per_topic[(topic, "validation")] == round(0.1 * n)
        assert per_topic[(topic, "test")] == round(0.2 * n)
        assert per_topic[(topic, "train")] == n - round(0.1 * n) - round(0.2 * n)


def test_split_counts_on_prefeval_topic_sizes():
    # PrefEval's 20 topic sizes (numbers only); the paper's 701 / 100 / 199.
    sizes = [31, 54, 51, 56, 62, 52, 53, 57, 52, 49, 43, 36, 54, 56, 45, 35, 58, 54, 56, 46]
    assignments = split_assignments({f"t{i}": n for i, n in enumerate(sizes)})
    counts = Counter(s for split_of in assignments.values() for s in split_of)
    assert (counts["train"], counts["validation"], counts["test"]) == (701, 100, 199)


def test_cli_writes_splits_and_prints_counts(fake_prefeval, fake_topics, tmp_path, capsys):
    from rlce_trl.cli import main

    out = tmp_path / "out"
    assert main(["prepare-prefeval", "--prefeval_dir", str(fake_prefeval), "--output_dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "explicit" in printed and "validation" in printed
    for form in FORMS:
        rows = [json.loads(line) for line in (out / form / "test.jsonl").read_text().splitlines()]
        assert len(rows) == sum(round(0.2 * n) for n in fake_topics.values())


def test_cli_error_for_wrong_path(tmp_path, capsys):
    from rlce_trl.cli import main

    assert main(["prepare-prefeval", "--prefeval_dir", str(tmp_path), "--output_dir", str(tmp_path / "o")]) == 2
    assert "git clone" in capsys.readouterr().err


def test_real_prefeval_counts(real_prefeval):
    built = build_prefeval(real_prefeval)
    for form in FORMS:
        assert [len(built[form][s]) for s in ("train", "validation", "test")] == [701, 100, 199]
    for form in FORMS:
        for split in ("train", "validation", "test"):
            for row in built[form][split]:
                # capped at 13,000 characters unless the form's own turns are longer (two persona rows)
                n_pad = len(row["prompt"]) - 2 - len(prefeval.preference_turns(form, _record(real_prefeval, row)))
                assert _chars(row) <= 13_000 or n_pad == 0
    ids = [[r["id"].split("/", 2)[2] for r in built[f]["test"]] for f in FORMS]
    assert ids[0] == ids[1] == ids[2]


_CACHE = {}


def _record(root, row):
    key = (row["form"], row["topic"])
    if key not in _CACHE:
        _CACHE[key] = prefeval.load_records(root, row["form"])[row["topic"]]
    return _CACHE[key][int(row["id"].rsplit("/", 1)[1])]
