"""The report page of a REAL tiny GRPO run (tiny Llama policy and frozen verifier on CPU), opened in headless Chromium
(Debian's package) over the DevTools protocol: it loads without console errors, the summary strip gives the run's
figures, the curves are drawn with labelled axes and plain-named legends, the filters narrow the group list, a group
opens with its tests and verdicts, completions come newest first and lead to their group. A hand-made trail checks
normalised verdict probabilities, hostile text, ellipses and long texts capped with the full text a click away.
Screenshots are saved as test artifacts (`$RLCE_TEST_ARTIFACTS`, default `test-artifacts/`)."""

import json
import math
import os
from pathlib import Path

import pytest
from browser import Browser, find_chromium

from rlce_trl.report import build_report

pytestmark = pytest.mark.slow
ARTIFACTS = Path(os.environ.get("RLCE_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts"))


@pytest.fixture(scope="module")
def report_page(tiny_model_dir, tmp_path_factory):
    from datasets import Dataset
    from testing_utils import preference_rows, tiny_grpo_args

    from rlce_trl import RLCEGRPOTrainer

    args = tiny_grpo_args(tmp_path_factory.mktemp("run") / "out", log_completions=True, max_steps=3)
    RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=Dataset.from_list(preference_rows(16))).train()
    page, data = build_report(args.output_dir)
    assert data.groups and data.log_history and data.completions
    return page, data


@pytest.fixture
def browser():
    executable = find_chromium()
    if executable is None:
        pytest.skip("chromium is not installed: `apt-get install -y chromium` (Debian) runs the browser test")
    b = Browser(executable)
    yield b
    b.close()


def rows(b):
    return b.evaluate("[...document.querySelectorAll('#groups tbody tr')].map(r => r.dataset.id)")


def set_filter(b, element, value):
    b.evaluate(f"(() => {{ const e = document.getElementById('{element}'); e.value = {value!r}; "
               "e.dispatchEvent(new Event('input')); return 1; })()")


def test_the_page_in_a_real_browser(report_page, browser):
    page, data = report_page
    b = browser
    b.open(Path(page).as_uri())
    assert b.errors() == []
    assert b.evaluate("document.title").startswith("rlce-trl report")

    # curves: every panel drawn with a visible line through every logged step
    drawn = b.evaluate("[...document.querySelectorAll('svg.curve')].map(s => [s.getAttribute('aria-label'), "
                       "[...s.querySelectorAll('polyline.series')].map(p => [p.dataset.key, +p.dataset.points, "
                       "p.getBBox().width])])")
    titles = [title for title, _ in drawn]
    assert titles == ["Rewards", "Verdict fractions", "Tie and verified rates", "Distinct answers per group",
                      "Verifier seconds vs step time", "Health: collapse", "Health: drift and entrenchment"]
    lines = [line for _, panel in drawn for line in panel]
    assert len(lines) >= 10
    for key, points, width in lines:  # a line through every step that logged a value (a NaN mean logs none)
        logged = sum(isinstance(e.get(key), (int, float)) for e in data.log_history if "step_time" in e)
        assert points == logged and (width > 100 or logged <= 1), key  # one point has no width
    assert sum(points == 3 for _, points, _ in lines) >= 9

    # axes labelled, legends in plain words with the raw key as a tooltip
    axes = b.evaluate("[...document.querySelectorAll('svg.curve')].map(s => [...s.querySelectorAll('text.axis')]"
                      ".map(t => t.textContent))")
    assert axes[0] == ["optimizer step", "mean reward"] and all(len(a) == 2 and a[1] for a in axes)
    legends = dict(b.evaluate("[...document.querySelectorAll('svg.curve g.legend-item')].map(g => [g.dataset.key, "
                              "g.querySelector('text').textContent + '|' + g.querySelector('title').textContent])"))
    assert legends["rewards/rlce_format/mean"] == "format reward|rewards/rlce_format/mean"
    if any("rewards/rlce_verified/mean" in e for e in data.log_history):  # left out of steps that scored no group
        assert legends["rewards/rlce_verified/mean"].startswith("verified-answer reward")
    else:
        assert "rewards/rlce_verified/mean" not in legends
    assert legends["rlce/verifier_seconds"] == "verifier time|rlce/verifier_seconds"
    assert all("/" not in text.split("|")[0] for text in legends.values()), legends

    # the summary strip: the run's figures, from the logged metrics
    strip = dict(b.evaluate("[...document.querySelectorAll('#summary .stat')].map(s => [s.dataset.label, "
                            "s.querySelector('.v').textContent])"))
    assert list(strip) == ["steps", "groups", "verified", "tied", "verdicts", "verifier time"]
    assert strip["steps"] == "3" and strip["groups"] == str(len(data.groups))
    logged = [e for e in data.log_history if "rlce/verified_fraction" in e]
    verified = sum(e["rlce/verified_fraction"] for e in logged) / len(logged)
    assert strip["verified"] == f"{100 * verified:.0f}%" and strip["tied"].endswith("%")
    assert strip["verdicts"].startswith("yes ") and strip["verifier time"].endswith("%")

    # completions: newest first
    steps = b.evaluate("[...document.querySelectorAll('#completions tbody tr')].map(r => +r.cells[0].textContent)")
    assert steps == sorted(steps, reverse=True) and steps[0] > steps[-1]

    # the filters narrow the list
    everything = rows(b)
    assert everything == [g["id"] for g in data.groups] and len(everything) == 12
    set_filter(b, "f-step", "2")
    assert rows(b) == [g["id"] for g in data.groups if g["step"] == 2] and len(rows(b)) < len(everything)
    set_filter(b, "f-step", "")
    status = data.groups[0]["status"]
    set_filter(b, "f-status", status)
    assert rows(b) == [g["id"] for g in data.groups if g["status"] == status] and len(rows(b)) < len(everything)
    set_filter(b, "f-status", "")
    set_filter(b, "f-text", "negative")
    assert rows(b) == [g["id"] for g in data.groups if "negative" in g["answers"]]
    assert b.evaluate("document.getElementById('count').textContent") == f"{len(rows(b))} of 12 groups"
    set_filter(b, "f-text", "")
    verdict = next(t["verdict"] for g in data.groups for t in g["tests"] if t["verdict"])
    set_filter(b, "f-verdict", verdict)
    assert rows(b) == [g["id"] for g in data.groups if any(t["verdict"] == verdict for t in g["tests"])]
    set_filter(b, "f-verdict", "")

    # a group opens with its tests and verdicts
    tested = next(g for g in data.groups if g["tests"])
    b.evaluate(f"document.querySelector('#groups tbody tr[data-id=\"{tested['id']}\"]').click(); 1")
    detail = b.evaluate("document.getElementById('detail').innerText")
    assert f"Group {tested['id']}" in detail and f"Evidence tests ({len(tested['tests'])})" in detail
    cells = b.evaluate("[...document.querySelectorAll('#detail tbody tr')].map(r => r.innerText)")
    for test in tested["tests"]:
        direction = f"A{test['favoured'] + 1} ≻ A{test['against'] + 1}"
        assert any(direction in c and (test["text"] or "") in c and (test["verdict"] or "abstained") in c
                   for c in cells), test

    # a completion leads to its group
    other = next(g for g in data.groups if g["id"] != tested["id"])
    b.evaluate(f"document.querySelector('a.glink[href=\"#group={other['id']}\"]').click(); 1")
    b.evaluate("new Promise(r => setTimeout(r, 100))")
    assert f"Group {other['id']}" in b.evaluate("document.getElementById('detail').innerText")

    b.evaluate(f"location.hash = 'group={tested['id']}'; new Promise(r => setTimeout(r, 100))")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report-page.png"
    b.screenshot(str(shot))
    assert shot.stat().st_size > 20_000
    assert b.errors() == []


def test_verdict_probabilities_and_hostile_text_in_a_real_browser(tmp_path, browser):
    """A trail whose verifier returned per-choice probabilities, with model text that looks like markup."""
    from rlce_trl.audit import EvidenceLog

    run = tmp_path / "run"
    test = {"favoured": 0, "against": 1, "text": "<img src=x onerror=alert(1)> the user said so", "verdict": "yes",
            "failure": None, "round": 0, "choice_logprobs": {"yes": math.log(0.9), "no": math.log(0.08)}}
    EvidenceLog(run / "rlce_evidence.jsonl").write([{
        "id": "1-0", "step": 1, "mode": "train", "method": "rlce", "status": "verified", "context": "</script>",
        "labels": None, "completions": ["\\boxed{a}", "\\boxed{b}"], "answers": ["a", "b"], "assignment": [0, 1],
        "tests": [test], "scores": [1.0, -1.0], "rewards": [1.0, 0.0], "winner": 0, "verified_answer": "a",
        "tie_break_round": False, "extra": None}])
    page, _ = build_report(str(run))
    b = browser
    b.open(Path(page).as_uri() + "#group=1-0")
    assert b.errors() == []
    cells = b.evaluate("[...document.querySelectorAll('#detail tbody tr')].map(r => r.innerText)")
    row = next(c for c in cells if "the user said so" in c)
    assert "<img src=x onerror=alert(1)>" in row and "A1 ≻ A2" in row
    # normalised over the choices: 0.9 / (0.9 + 0.08); the raw log-probabilities stay in the tooltip and the trail
    assert "0.92" in row and "0.90" not in row
    tip = b.evaluate("document.querySelector('#detail .prob').title")
    assert "yes 0.92, no 0.08" in tip and f"yes {math.log(0.9):.3f}" in tip
    assert json.loads((run / "rlce_evidence.jsonl").read_text().splitlines()[-1])["tests"][0]["choice_logprobs"] == \
        test["choice_logprobs"]
    assert b.evaluate("document.querySelectorAll('#detail img').length") == 0


def test_long_texts_are_capped_with_the_full_text_a_click_away(tmp_path, browser):
    """A 30 MB completion and a long verified answer: the page stays small, shows the head with an ellipsis and links
    the full text; completions come newest first."""
    import pandas as pd

    from rlce_trl.audit import EvidenceLog

    run = tmp_path / "run"
    huge = "The answer, at length. " * 1_400_000  # about 32 MB
    answer = "a preference for quiet vegetarian restaurants close to the office, booked well in advance"
    groups = [{"id": f"{s}-0", "step": s, "mode": "train", "method": "rlce", "status": "verified", "context": "ctx",
               "labels": None, "completions": [f"\\boxed{{{answer}}}", huge if s == 2 else "short"],
               "answers": [answer, "b"], "assignment": [0, 1], "scores": [1.0, -1.0], "rewards": [1.0, 0.0],
               "winner": 0, "verified_answer": answer, "tie_break_round": False, "extra": None,
               "tests": [{"favoured": 0, "against": 1, "text": "t", "verdict": "yes", "failure": None, "round": 0,
                          "choice_logprobs": {"yes": -0.2, "no": -1.9}}]} for s in (1, 2)]
    EvidenceLog(run / "rlce_evidence.jsonl").write(groups)
    (run / "completions").mkdir()
    pd.DataFrame({"step": [1, 1, 2, 2], "prompt": ["p"] * 4, "completion": ["old", "older", huge, "new"],
                  "rlce_group": ["1-0", "1-0", "2-0", "2-0"], "reward": [0.0, 0.5, 1.0, 0.2]}).to_parquet(
        run / "completions" / "completions_00002.parquet")
    page, _ = build_report(str(run))
    assert os.path.getsize(page) < 200_000  # not 30 MB
    full = sorted((run / "report" / "full").glob("*.txt"))
    assert len(full) == 1 and full[0].read_text(encoding="utf-8") == huge  # written once, for both places
    b = browser
    b.open(Path(page).as_uri() + "#group=2-0")
    assert b.errors() == []
    # the list's verified answer is cut with an ellipsis, whole in its tooltip
    shown = b.evaluate("document.querySelector('#groups tbody tr[data-id=\"2-0\"]').cells[5].textContent")
    assert shown == answer[:80] + "…" and b.evaluate(
        "document.querySelector('#groups tbody tr[data-id=\"2-0\"]').cells[5].title") == answer
    # the huge rollout: its head, an ellipsis, and a link to the whole text beside the page
    # (the link below the scrolling box, not inside it)
    pre = b.evaluate("document.querySelector('#detail a.full').previousElementSibling.innerText")
    assert pre.startswith(huge[:100]) and pre.endswith("…") and len(pre) == 2001
    assert b.evaluate("document.querySelector('#detail a.full').innerText") == f"full text ({len(huge):,} characters)"
    href = b.evaluate("document.querySelector('#detail a.full').href")
    assert href == (run / "report" / full[0].relative_to(run / "report")).as_uri()
    # completions: newest first, the huge one capped with its link
    texts = b.evaluate("[...document.querySelectorAll('#completions tbody tr')].map(r => r.cells[3].innerText)")
    assert texts[0] == "new" and texts[-1] == "old" and "full text (" in texts[1] and len(texts[1]) < 2100
    b.evaluate("document.getElementById('completions').scrollIntoView(); 1")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    b.screenshot(str(ARTIFACTS / "report-page-long-texts.png"))
    assert b.errors() == []
