"""Selection over a shared pool: selectors, fallbacks, budgets, resumable runs, bad input, the summary."""

import json

import pytest
from fakes import ScriptedVerifier, evidence_verifier

from rlce_trl.evidence.pipeline import EvidenceSettings
from rlce_trl.selection import (
    budget_subsets,
    make_selector,
    read_pool,
    row_from_record,
    select_answer,
    select_rows,
    summarize,
)

LABELS = ["positive", "negative", "neutral"]


def record(id_, answers, gold="positive", greedy="positive", frames=None):
    def text(a):
        if a is None:
            return "I cannot tell."
        return f"<think>look</think><keyframes>{frames or 1}</keyframes><answer>{a}</answer>"

    return {"id": id_, "prompt": [{"role": "user", "content": f"how does row {id_} feel?"}], "answer_options": LABELS,
            "gold": gold, "num_frames": 4, "greedy": {"text": text(greedy)},
            "candidates": [{"text": text(a), "token_logprobs": [-0.1, -0.2]} for a in answers]}


def run(selector, rec, subset=None):
    row = row_from_record(rec)
    return selector.select([(row, subset or list(range(len(row.candidates))))])[0]


def test_plain_selectors():
    rec = record("a", ["negative", "positive", "negative", None])
    assert run(make_selector("majority"), rec).answer == "negative"
    assert run(make_selector("single"), rec).answer == "negative"
    assert run(make_selector("greedy"), rec).answer == "positive"
    assert run(make_selector("oracle"), rec).answer == "positive"
    assert run(make_selector("oracle"), rec, [0, 2]).answer == "negative"  # no correct candidate: majority
    assert run(make_selector("majority"), record("b", [None, None])).status == "no_answer"
    tie = record("c", ["neutral", "negative", "negative", "neutral"])
    assert run(make_selector("majority"), tie).answer == "neutral"  # first-seen on ties
    with pytest.raises(ValueError, match="Unknown selector 'best'.*elect_noframes.*rlce"):
        make_selector("best")
    with pytest.raises(ValueError, match="needs a verifier"):
        make_selector("rlce")


def test_rlce_best_of_n_and_its_fallbacks():
    verifier = evidence_verifier({"positive>negative": "yes", "negative>positive": "no"})
    rlce = make_selector("rlce", verifier, settings=EvidenceSettings(redact_answers=False))
    rows = [row_from_record(r) for r in (
        record("win", ["negative", "positive", "negative"]),  # majority says negative, the evidence positive
        record("one", ["neutral", "neutral"]),
        record("none", [None, None], greedy="negative"),
    )]
    out = rlce.select([(r, list(range(len(r.candidates)))) for r in rows])
    assert [(s.answer, s.status) for s in out] == [("positive", "selected"), ("neutral", "single_answer"),
                                                   ("negative", "fallback_greedy")]
    assert len({b[0].stage for b in verifier.batches}) == len(verifier.batches)  # one batched call per stage
    tied = evidence_verifier({})  # every verdict "unknown": no winner
    out = make_selector("rlce", tied, settings=EvidenceSettings(redact_answers=False)).select(
        [(row_from_record(record("t", ["negative", "positive", "negative"])), [0, 1, 2])])
    assert (out[0].answer, out[0].status) == ("negative", "fallback_majority")


def test_scorer_selectors_are_built_like_training_scorers_by_alias_or_dotted_path():
    """Every name outside `SELECTORS` goes through `rlce_trl.methods.build_scorer`: an alias sets the RLCE mode, a
    `package.module:Class` path imports the scorer; the same RLCE best-of-n answer either way."""
    from rlce_trl.methods.usc import USCScorer
    from rlce_trl.selection import SELECTORS, needs_verifier, selector_name_problem

    verifier = evidence_verifier({"positive>negative": "yes", "negative>positive": "no"})
    settings = EvidenceSettings(redact_answers=False)
    static = make_selector("rlce_static", verifier, settings=settings)
    assert static.scorer.settings.mode == "static"
    rec = record("win", ["negative", "positive", "negative"])
    assert run(static, rec).answer == run(make_selector("rlce", verifier, settings=settings), rec).answer == "positive"
    dotted = make_selector("rlce_trl.methods.usc:USCScorer", verifier, settings=settings)
    assert isinstance(dotted.scorer, USCScorer)
    assert selector_name_problem("rlce_trl.methods.usc:USCScorer") is None
    assert "Unknown selector 'best'" in selector_name_problem("best")
    assert [n for n in ("majority", "elect", "rlce", "x.y:Z") if needs_verifier(n)] == ["rlce", "x.y:Z"]
    assert set(SELECTORS) == {"greedy", "single", "majority", "oracle", "elect", "elect_noframes"}
    with pytest.raises(ValueError, match="cannot import 'no_such_module'"):
        make_selector("no_such_module:Scorer", verifier)


def test_elect_selector_runs_the_conservative_run_first_and_the_referee():
    rec = record("e", ["negative", "negative", "negative", "negative"], greedy="positive")
    sel = run(make_selector("elect"), rec, [0, 1])
    assert sel.samples <= 2  # budget 2: the greedy run + one candidate
    words = []

    def reply(request):
        words.append(request.stage)
        return "unsupported"

    referee = ScriptedVerifier(reply)
    rec = record("r", ["negative", "positive", "negative", "positive"], greedy="neutral")
    flipped = run(make_selector("elect", referee, referee=True), rec)
    assert words and set(words) == {"elect_referee"}
    assert flipped.status == "referee_flip"
    assert select_answer([c["text"] for c in rec["candidates"]], "elect_noframes", labels=LABELS).answer is not None


def test_budget_subsets_are_seeded():
    assert budget_subsets("x", 4, 4, 5) == [[0, 1, 2, 3]]
    subsets = budget_subsets("x", 8, 3, 5, seed=1)
    assert subsets == budget_subsets("x", 8, 3, 5, seed=1) != budget_subsets("y", 8, 3, 5, seed=1)
    assert all(len(set(s)) == 3 for s in subsets) and len(subsets) == 5


class Exploding:
    name = "exploding"

    def select(self, items):
        if any(row.id == "bad" for row, _ in items):
            raise RuntimeError("boom")
        return make_selector("majority").select(items)


def test_resumable_run_with_bad_input_counted(tmp_path):
    pool = tmp_path / "pool.jsonl"
    lines = [json.dumps(record("a", ["positive", "negative", "positive", "negative"])), "{not json",
             json.dumps({"id": "x"}), json.dumps(record("bad", ["negative", "negative"])),
             json.dumps(record("c", ["negative", None, "negative", "positive"]))]
    pool.write_text("\n".join(lines[:3]) + "\n")
    rows, problems = read_pool(tmp_path)
    assert len(rows) == 1 and len(problems) == 2
    selectors = [make_selector("majority"), make_selector("oracle"), Exploding()]
    path = select_rows(rows, selectors, [1, 4], tmp_path / "out", subsets=3, chunk_size=1, log=lambda _: None)
    pool.write_text("\n".join(lines) + "\n")
    rows, _ = read_pool(tmp_path)
    select_rows(rows, selectors, [1, 4], tmp_path / "out", subsets=3, chunk_size=1, log=lambda _: None)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["id"] for r in records] == ["a", "bad", "c"]  # resumed: "a" not redone
    summary = summarize(records, resamples=200)
    m4 = summary["selectors"]["majority"]["budgets"]["4"]
    assert m4["rows"] == 2 and m4["rows_short"] == 1  # "bad" has 2 candidates
    assert summary["selectors"]["exploding"]["budgets"]["1"]["errors"] == 3  # 3 subsets of row "bad"
    assert summary["unparsed_candidates"] == 1
    o4 = summary["selectors"]["oracle"]["budgets"]["4"]
    assert o4["accuracy"] == 1.0 and o4["delta_vs_majority"] == pytest.approx(0.5)  # c: majority negative is wrong
    for s in summary["selectors"].values():  # the oracle bounds every selector
        for b, m in s["budgets"].items():
            assert m["accuracy"] <= summary["selectors"]["oracle"]["budgets"][b]["accuracy"] + 1e-12


def test_summary_reversal_and_harm_by_hand():
    def cell(correct, any_correct=True, subset=(0,)):
        return {"answer": "x", "status": "selected", "samples": 1, "correct": correct, "subset": list(subset),
                "any_correct": any_correct}

    records = [
        {"id": "1", "n": 2, "results": {"majority": {"2": [cell(False)]}, "s": {"2": [cell(True)]}}, "cost": {}},
        {"id": "2", "n": 2, "results": {"majority": {"2": [cell(False)]}, "s": {"2": [cell(False)]}}, "cost": {}},
        {"id": "3", "n": 2, "results": {"majority": {"2": [cell(True)]}, "s": {"2": [cell(False)]}}, "cost": {}},
        {"id": "4", "n": 2, "results": {"majority": {"2": [cell(False, False)]}, "s": {"2": [cell(False, False)]}},
         "cost": {}},
    ]
    s = summarize(records, resamples=200)["selectors"]["s"]["budgets"]["2"]
    assert s["reversal_rate"] == pytest.approx(0.5) and s["reversal_rows"] == 2  # rows 1, 2 (row 4 has no hit)
    assert s["harm_rate"] == 1.0 and s["accuracy"] == 0.25 and s["delta_vs_majority"] == 0.0
    assert s["ci95"][0] <= 0.0 <= s["ci95"][1]


def test_mcnemar_and_pool_stats():
    from rlce_trl.selection.protocol import mcnemar_exact, pool_stats

    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 0) == pytest.approx(2 / 32)  # two-sided exact binomial
    assert mcnemar_exact(3, 3) == 1.0
    rec = record("s", ["positive", None], frames="1, 9")
    rec["evidence"] = [1]
    stats = pool_stats([row_from_record(rec)])
    assert stats["candidates"] == 2 and stats["answer_rate"] == 0.5 and stats["schema_rate"] == 0.5
    assert stats["EGS"] == pytest.approx((0.5 * (1 / 2 + 1)) / 2)  # {1} valid, 9 out of range; the other cites none
    assert stats["cited_fraction"] == pytest.approx((1 / 4) / 2)


def test_sample_pool_counts_malformed_rows_and_resumes(tmp_path):
    from rlce_trl.generation.generators import Sampled
    from rlce_trl.selection import sample_pool

    calls = []

    def fake_sampler(prompts, specs):  # a FAKE sampler (the real ones: tests/generation/test_generators.py)
        calls.append(len(prompts))
        return [[Sampled("\\boxed{a}", [-0.1, -0.2])] * len(specs) for _ in prompts]

    rows = [{"id": 1, "prompt": "x"}, {"prompt": "no id"}, "junk", {"id": 2, "prompt": ""}, {"id": 3, "prompt": "y"}]
    counts = sample_pool(rows, fake_sampler, tmp_path, n=2, log=lambda _: None)
    assert counts == {"rows": 5, "sampled": 2, "resumed": 0, "skipped_malformed": 3,
                      "skipped_unreadable_clip": 0}
    with (tmp_path / "pool.jsonl").open("a") as f:
        f.write('{"id": "4", "cut')  # a line cut by an interruption
    again = sample_pool(rows + [{"id": 4, "prompt": "z"}], fake_sampler, tmp_path, n=2, log=lambda _: None)
    assert again["sampled"] == 1 and again["resumed"] == 2 and calls == [2, 1]
    pool, problems = read_pool(tmp_path)
    assert [r.id for r in pool] == ["1", "3", "4"] and problems == []  # the cut line was dropped before appending
    assert pool[0].candidates[0].confidence == pytest.approx(0.8187, abs=1e-4)  # last ceil(25% of 2) = 1 token


def test_winner_agreement_by_hand():
    """Group-level agreement: the selector's own winner vs gold, on the cells where it did not fall back."""
    from rlce_trl.selection import format_table

    def cell(correct, status="selected"):
        return {"answer": "x", "status": status, "samples": 4, "correct": correct, "subset": [0, 1, 2, 3],
                "any_correct": True}

    rows = [(True, "selected", False), (True, "selected", True), (False, "selected", True), (True, "tie", False)]
    records = [{"id": str(i), "n": 4, "cost": {},
                "results": {"majority": {"4": [cell(ref)]}, "rlce": {"4": [cell(correct, status)]}}}
               for i, (correct, status, ref) in enumerate(rows)]
    summary = summarize(records, resamples=200)
    m = summary["selectors"]["rlce"]["budgets"]["4"]
    assert m["winner_cells"] == 3  # the tie fell back: not a winner
    assert m["winner_accuracy"] == pytest.approx(2 / 3) and m["reference_on_winner_cells"] == pytest.approx(2 / 3)
    lo, hi = m["winner_ci95"]
    assert 0.0 <= lo <= 2 / 3 <= hi <= 1.0
    assert "| rlce | 4 | 3 | 66.7 [" in format_table(summary)
