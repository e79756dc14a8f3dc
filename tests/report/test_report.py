"""`rlce-trl report` on hand-made run directories: what each source gives, and bad input (a plain TRL run without
evidence, a truncated trail, an empty or missing directory)."""

import json
import os

import pytest

from rlce_trl.audit import EvidenceLog, group_id
from rlce_trl.cli import main
from rlce_trl.report import build_report
from rlce_trl.report.plots import panels


def history(steps=3, prefix="rlce"):
    return [{"step": s, "reward": 0.1 * s, "rewards/rlce_verified/mean": 0.2 * s, f"{prefix}/verdict_yes_frac": 0.5,
             f"{prefix}/verdict_no_frac": 0.25, f"{prefix}/tie_rate": 0.1, f"{prefix}/verified_fraction": 0.6,
             f"{prefix}/distinct_answers_mean": 2.0, f"{prefix}/verifier_seconds": 1.5, "step_time": 3.0}
            for s in range(1, steps + 1)] + [{"step": steps, "train_runtime": 10.0, "train_loss": float("nan")}]


def record(step, index, status="verified", answers=("positive", "negative")):
    return {"schema": 1, "id": group_id("train", step, index), "step": step, "mode": "train", "method": "rlce",
            "status": status, "context": "ctx </script><b>x</b>", "labels": None, "completions": ["\\boxed{positive}"],
            "answers": list(answers), "assignment": [0], "scores": [1.0, -1.0], "rewards": [1.0], "winner": 0,
            "verified_answer": answers[0], "tie_break_round": False, "extra": None,
            "tests": [{"favoured": 0, "against": 1, "text": "t", "verdict": "yes", "failure": None, "round": 0,
                       "choice_logprobs": None}]}


def make_run(path, steps=3, evidence=True):
    os.makedirs(path / "checkpoint-2")
    (path / "checkpoint-2" / "trainer_state.json").write_text(json.dumps({"global_step": 2,
                                                                           "log_history": history(2)}))
    (path / "trainer_state.json").write_text(json.dumps({"global_step": steps, "log_history": history(steps)}))
    if evidence:
        EvidenceLog(path / "rlce_evidence.jsonl").write([record(s, g) for s in range(1, steps + 1) for g in (0, 1)])
    return path


def embedded(html):
    start = html.index('id="rlce-data">') + len('id="rlce-data">')
    return json.loads(html[start:html.index("</script>", start)])


def test_page_has_every_curve_and_every_group(tmp_path):
    run = make_run(tmp_path / "run")
    page, data = build_report(str(run))
    with open(page, encoding="utf-8") as f:
        html = f.read()
    assert page == str(run / "report" / "index.html") and data.state_file == str(run / "trainer_state.json")
    for title in ("Rewards", "Verdict fractions", "Tie and verified rates", "Distinct answers per group",
                  "Verifier seconds vs step time"):
        assert f'aria-label="{title}"' in html
    assert html.count('class="series"') == 2 + 2 + 2 + 1 + 2
    assert [g["id"] for g in embedded(html)["groups"]] == [f"{s}-{g}" for s in (1, 2, 3) for g in (0, 1)]
    assert "</script><b>" not in html.split('id="rlce-data">')[1].split("</script>")[0]  # model text stays data
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in html
    assert (run / "report" / "curves.png").stat().st_size > 1000
    assert (run / "report" / "curve_rewards.png").exists()


def test_baseline_metrics_use_their_own_prefix():
    chosen = dict(panels(history(2, prefix="policy_judge")))
    assert chosen["Verdict fractions"] == ["policy_judge/verdict_yes_frac", "policy_judge/verdict_no_frac"]


def test_a_run_without_evidence_still_gets_its_metrics_and_a_clear_message(tmp_path, capsys):
    run = make_run(tmp_path / "plain", evidence=False)
    assert main(["report", str(run)]) == 0
    out = capsys.readouterr().out
    assert "No evidence trail (rlce_evidence.jsonl)" in out and "plain TRL run" in out
    html = (run / "report" / "index.html").read_text()
    assert 'aria-label="Rewards"' in html and 'id="browser"' not in html and "No evidence trail" in html


def test_checkpoint_state_is_used_when_the_run_dir_has_none(tmp_path):
    run = make_run(tmp_path / "killed")
    os.remove(run / "trainer_state.json")
    _, data = build_report(str(run))
    assert data.state_file == str(run / "checkpoint-2" / "trainer_state.json")


def test_a_truncated_last_line_is_skipped_and_counted(tmp_path, capsys):
    run = make_run(tmp_path / "cut")
    with open(run / "rlce_evidence.jsonl", "a") as f:
        f.write('{"id": "0-9", "step": 0, "tests": 5}\n')  # valid JSON, not a group record: skipped too
        f.write('{"schema": 1, "id": "4-0", "step": 4, "sta')
    assert main(["report", str(run), "--output_dir", str(tmp_path / "out")]) == 0
    assert "Skipped 2 unreadable line(s)" in capsys.readouterr().out
    html = (tmp_path / "out" / "index.html").read_text()
    assert len(embedded(html)["groups"]) == 6 and "Skipped 2 unreadable" in html


def test_size_limit_and_max_groups_are_reported(tmp_path):
    run = make_run(tmp_path / "big")
    with open(run / "rlce_evidence.jsonl", "a") as f:
        f.write(json.dumps({"type": "limit", "step": 3, "max_bytes": 10}) + "\n")
    _, data = build_report(str(run), max_groups=4)
    assert [g["id"] for g in data.groups] == ["2-0", "2-1", "3-0", "3-1"]
    notes = " ".join(data.notes)
    assert "newest 4 of 6 groups" in notes and "stops at step 3" in notes


@pytest.mark.parametrize("setup", ["missing", "empty"])
def test_nothing_to_report_is_a_one_line_error(tmp_path, capsys, setup):
    path = tmp_path / "nothing"
    if setup == "empty":
        path.mkdir()
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "output_dir of a training run" in err


@pytest.mark.parametrize("state, needle", [("{bad", "is not valid JSON"),
                                           ('{"log_history": 5}', "`log_history` is a int"),
                                           ('{"log_history": [1, {"step": 1, "loss": 0.5}]}', None)])
def test_a_corrupt_or_wrong_typed_trainer_state_is_named(tmp_path, capsys, state, needle):
    run = tmp_path / "run"
    run.mkdir()
    (run / "trainer_state.json").write_text(state)
    code = main(["report", str(run), "--output_dir", str(tmp_path / "page")])
    err = capsys.readouterr().err
    if needle is None:  # a stray entry is skipped and said on the page, the rest is drawn
        assert code == 0 and "Skipped 1 log_history entries" in (tmp_path / "page" / "index.html").read_text()
    else:
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and needle in err


def test_an_unreadable_trainer_state_is_one_input_error(tmp_path):
    from rlce_trl.errors import InputError
    from rlce_trl.report.data import read_log_history

    unreadable = tmp_path / "trainer_state.json"
    unreadable.mkdir()  # opening it fails (IsADirectoryError), as a file without read permission does
    with pytest.raises(InputError, match="trainer_state.json: cannot read it"):
        read_log_history(unreadable)


def test_the_summary_strip_reads_the_logged_metrics(tmp_path):
    from rlce_trl.report.data import load_run
    from rlce_trl.report.summary import summary_items

    run = make_run(tmp_path / "run")
    items = {i.label: i for i in summary_items(load_run(str(run)))}
    assert {k: v.value for k, v in items.items()} == {
        "steps": "3", "groups": "6", "verified": "60%", "tied": "10%", "verdicts": "yes 50% · no 25%",
        "verifier time": "50%"}
    assert "rlce/verified_fraction" in items["verified"].detail and "verified 6" in items["groups"].detail
    html = open(build_report(str(run))[0]).read()
    assert 'id="summary"' in html and 'data-label="verifier time"' in html


def test_a_run_with_no_metrics_says_so_in_the_strip(tmp_path):
    from rlce_trl.report.data import load_run
    from rlce_trl.report.summary import summary_items

    run = tmp_path / "trail"
    EvidenceLog(run / "rlce_evidence.jsonl").write([record(4, 0)])
    items = {i.label: i.value for i in summary_items(load_run(str(run)))}
    assert items == {"steps": "4", "groups": "1", "verified": "n/a", "tied": "n/a", "verdicts": "n/a",
                     "verifier time": "n/a"}


def test_legends_use_plain_names_and_axes_are_labelled(tmp_path):
    from rlce_trl.report.plots import metric_name

    assert metric_name("rewards/rlce_verified/mean") == "verified-answer reward"
    assert metric_name("rewards/usc_consensus/mean") == "usc consensus reward"
    assert metric_name("policy_judge/verdict_unknown_frac") == "unknown verdicts"
    assert metric_name("rlce/unresolved_tie_rate") == "still tied after tie-break"
    assert metric_name("something/brand_new") == "brand new"  # another key: its last part in words
    html = open(build_report(str(make_run(tmp_path / "run")))[0]).read()
    assert '<title>rlce/tie_rate</title>' in html and ">tied before tie-break<" in html
    assert ">optimizer step<" in html and ">share of verdicts<" in html and ">seconds per step<" in html


def test_verdict_probabilities_are_normalised_over_the_choices():
    import math

    from rlce_trl.report.data import choice_probs

    probs = choice_probs({"yes": math.log(0.9), "no": math.log(0.08)})
    assert probs == pytest.approx({"yes": 0.9 / 0.98, "no": 0.08 / 0.98})
    json_reply = choice_probs({"verdict=yes": -5.0, "verdict=no": -5.0, "verdict=unknown": -5.0, "x=1": -9.0})
    assert json_reply == pytest.approx({"verdict=yes": 1 / 3, "verdict=no": 1 / 3, "verdict=unknown": 1 / 3,
                                        "x=1": 1.0})
    assert choice_probs({"yes": float("-inf"), "no": "bad"}) is None and choice_probs([1]) is None


def test_long_texts_are_capped_and_written_beside_the_page(tmp_path):
    run = make_run(tmp_path / "run")
    long = "why " * 5000
    rec = record(9, 0)
    rec["context"] = long
    EvidenceLog(run / "rlce_evidence.jsonl").write([rec])
    page, data = build_report(str(run))
    context = next(g for g in embedded(open(page).read())["groups"] if g["id"] == rec["id"])["context"]
    assert context["text"] == long[:2000] + "…" and context["chars"] == len(long)
    assert (run / "report" / context["full"]).read_text() == long
    assert data.groups[-1]["context"] == long  # capped on the page only
    (run / "report" / "full" / "stale.txt").write_text("old")
    build_report(str(run))
    assert not (run / "report" / "full" / "stale.txt").exists()  # a rebuilt page keeps only its own texts


def test_completions_come_newest_first(tmp_path):
    pd = pytest.importorskip("pandas")
    from rlce_trl.report.data import load_completions

    (tmp_path / "completions").mkdir()
    for n, steps in ((1, [1, 1]), (2, [2, 2])):
        pd.DataFrame({"step": steps, "completion": [f"{s}-{i}" for i, s in enumerate(steps)]}).to_parquet(
            tmp_path / "completions" / f"completions_{n:05d}.parquet")
    rows, _ = load_completions(str(tmp_path), [])
    assert [r["completion"] for r in rows] == ["2-1", "2-0", "1-1", "1-0"]
