"""The verdict reader against a corpus of >= 1,000 hostile validator replies (`make_verdict_corpus.py`): 0 misread."""

import importlib.util
import json
import random
from collections import Counter
from pathlib import Path

from rlce_trl.evidence.verdicts import parse_verdict

_SPEC = importlib.util.spec_from_file_location("corpus", Path(__file__).with_name("make_verdict_corpus.py"))
corpus = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(corpus)
ROWS = [json.loads(line) for line in Path(corpus.OUT).read_text(encoding="ascii").split("\n") if line]


def test_the_committed_corpus_is_the_seeded_script_output():
    assert ROWS == corpus.build(random.Random(corpus.SEED))
    assert len(ROWS) >= 1000
    kinds = Counter(row["kind"] for row in ROWS)
    for kind in ("negated", "hedged", "instruction", "conflicting", "json", "junk", "noise", "homoglyph"):
        assert kinds[kind] >= 10, kind
    assert kinds["long"] and kinds["truncated_word"] and kinds["zero_width"]
    assert kinds["plain"] >= 50 and kinds["plain_hostile"] >= 100 and kinds["plain_truncated"] >= 10


def test_no_reply_is_misread():
    misread = []
    for row in ROWS:
        verdict, reason = parse_verdict(row["reply"], row["finish"])
        expect = row["expect"]
        allowed = {None} if expect == "abstain" else {None, expect[5:]} if expect.startswith("safe:") else {expect}
        if verdict not in allowed:
            misread.append((row["kind"], row["reply"][:60], expect, verdict, reason))
        assert (verdict is None) == (reason is not None)
    assert misread == []


def test_each_abstention_is_counted_under_its_own_reason():
    reasons = {kind: Counter() for kind in ("negated", "hedged", "instruction", "conflicting", "plain_hostile")}
    for row in ROWS:
        if row["kind"] in reasons:
            reasons[row["kind"]][parse_verdict(row["reply"], row["finish"])[1]] += 1
    for kind, reason in (("negated", "negated"), ("hedged", "hedged"), ("instruction", "instruction"),
                         ("conflicting", "ambiguous"), ("plain_hostile", "idiom")):
        assert reasons[kind].most_common(1)[0][0] == reason, (kind, reasons[kind])


def test_a_verdict_word_followed_by_plain_words_is_read():
    plain = [row for row in ROWS if row["kind"] == "plain"]
    read = [parse_verdict(row["reply"], row["finish"])[0] for row in plain]
    assert read == [row["expect"].removeprefix("safe:") for row in plain]
