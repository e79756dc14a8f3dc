"""The report page of a REAL tiny GRPO run (tiny Llama policy and frozen verifier on CPU), opened in headless Chromium
(Debian's package) over the DevTools protocol: it loads without console errors, the curves are drawn, the filters
narrow the group list, a group opens with its tests and verdicts, a completion leads to its group. A screenshot is
saved as a test artifact (`$RLCE_TEST_ARTIFACTS`, default `test-artifacts/`)."""

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
                      "Verifier seconds vs step time"]
    lines = [line for _, panel in drawn for line in panel]
    assert len(lines) >= 10
    for key, points, width in lines:  # a line through every step that logged a value (a NaN mean logs none)
        logged = sum(isinstance(e.get(key), (int, float)) for e in data.log_history if "step_time" in e)
        assert points == logged and (width > 100 or logged == 0), key
    assert sum(points == 3 for _, points, _ in lines) >= 9

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
    import math

    from rlce_trl.audit import write_group_evidence

    run = tmp_path / "run"
    test = {"favoured": 0, "against": 1, "text": "<img src=x onerror=alert(1)> the user said so", "verdict": "yes",
            "failure": None, "round": 0, "choice_logprobs": {"yes": math.log(0.9), "no": math.log(0.08)}}
    write_group_evidence(run / "rlce_evidence.jsonl", [{
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
    assert "<img src=x onerror=alert(1)>" in row and "0.90" in row and "A1 ≻ A2" in row
    assert b.evaluate("document.querySelectorAll('#detail img').length") == 0
