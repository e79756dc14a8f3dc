"""The evidence audit trail: records from the real pipeline (scripted FAKE verifier), the JSONL log (size limit,
resume, truncated lines), and the trail a real tiny GRPO run writes and resumes."""

import glob
import json
import os

import pytest
from fakes import ScriptedVerifier, answers_of, claim_of

from rlce_trl.audit import EvidenceLog, EvidenceRecorder, group_record
from rlce_trl.data.jsonl import read_jsonl_lenient
from rlce_trl.evidence.pipeline import EvidencePipeline, EvidenceSettings
from rlce_trl.methods import build_scorer
from rlce_trl.scoring import Group

LABELS = ("positive", "negative")
PLAIN = EvidenceSettings(redact_answers=False)


class ProbabilityVerifier(ScriptedVerifier):
    """A FAKE backend that, like a logit-scoring one, puts per-choice log-probabilities on validation replies."""

    def _generate(self, requests):
        replies = super()._generate(requests)
        for request, reply in zip(requests, replies, strict=True):
            if request.stage == "validation":
                reply.choice_logprobs = {"yes": -0.1, "no": -2.5, "unknown": -4.0}
        return replies


def scripted(verdicts):
    def reply(request):
        if request.stage == "construction":
            a, b = answers_of(request)
            return f"{a}>{b}"
        value = verdicts.get(claim_of(request), "unknown")
        return value.pop(0) if isinstance(value, list) else value

    return reply


def test_record_holds_answers_tests_verdicts_probabilities_tie_round_and_winner():
    # positive>negative is "no" first, negative>positive "no": a tie, broken by the extra round ("yes" for positive)
    verdicts = {"positive>negative": ["no", "yes"], "negative>positive": ["no", "no"]}
    verifier = ProbabilityVerifier(scripted(verdicts))
    group = Group("the user said the food", ["a \\boxed{positive}", "\\boxed{negative}", "\\boxed{positive}", "hm"],
                  labels=LABELS)
    (result,), _ = EvidencePipeline(verifier, PLAIN).score([group])
    record = group_record(group, result, group_id="3-0", step=3)
    json.dumps(record, allow_nan=False)  # strict JSON
    assert record["id"] == "3-0" and record["step"] == 3 and record["mode"] == "train" and record["method"] == "rlce"
    assert record["answers"] == ["positive", "negative"] and record["assignment"] == [0, 1, 0, None]
    assert record["status"] == "verified" and record["winner"] == 0 and record["verified_answer"] == "positive"
    assert record["rewards"] == [1.0, 0.0, 1.0, 0.0] and record["tie_break_round"] is True
    first = [t for t in record["tests"] if t["round"] == 0]
    extra = [t for t in record["tests"] if t["round"] == 1]
    assert {(t["favoured"], t["against"], t["text"], t["verdict"]) for t in first} == {
        (0, 1, "positive>negative", "no"), (1, 0, "negative>positive", "no")}
    assert {(t["favoured"], t["verdict"]) for t in extra} == {(0, "yes"), (1, "no")}
    assert all(t["choice_logprobs"] == {"yes": -0.1, "no": -2.5, "unknown": -4.0} for t in record["tests"])
    assert record["completions"][0] == "a \\boxed{positive}" and record["labels"] == ["positive", "negative"]


def test_a_reply_without_probabilities_records_none():
    verifier = ScriptedVerifier(scripted({"positive>negative": "yes"}))
    group = Group("c", ["\\boxed{positive}", "\\boxed{negative}"], labels=LABELS)
    (result,), _ = EvidencePipeline(verifier, PLAIN).score([group])
    record = group_record(group, result, group_id="1-0", step=1)
    assert all(t["choice_logprobs"] is None for t in record["tests"]) and record["tie_break_round"] is False


def test_a_baseline_keeps_its_judgments():
    verifier = ScriptedVerifier(lambda request: "Yes" if "positive" in request.messages[-1]["content"] else "No")
    group = Group("c", ["\\boxed{positive}", "\\boxed{negative}"], labels=LABELS)
    (result,), _ = build_scorer("policy_judge", verifier, PLAIN).score([group])
    record = group_record(group, result, group_id="1-0", step=1, method="policy_judge")
    assert record["method"] == "policy_judge" and record["tests"] == []
    assert record["scores"] == [1.0, 0.0] and record["winner"] == 0  # the judgments, per distinct answer


def test_size_limit_stops_the_trail_with_one_marker(tmp_path):
    path = tmp_path / "e.jsonl"
    records = [{"id": f"{s}-0", "step": s, "text": "x" * 100} for s in range(1, 20)]
    log = EvidenceLog(path, max_bytes=1000)
    written = log.write(records)
    assert 0 < written < len(records) and log.limit_reached
    rows, skipped = read_jsonl_lenient(path)
    assert skipped == 0 and rows[-1]["type"] == "limit" and path.stat().st_size < 1000 + 200
    assert log.write(records) == 0  # nothing more once the limit is reached


def test_resume_drops_records_after_the_checkpoint_and_a_truncated_line(tmp_path):
    path = tmp_path / "e.jsonl"
    EvidenceLog(path).write([{"id": f"{s}-{g}", "step": s} for s in (1, 2, 3) for g in (0, 1)])
    with path.open("a") as f:
        f.write('{"id": "4-0", "step": 4, "answ')  # a killed writer
    assert read_jsonl_lenient(path)[1] == 1
    recorder = EvidenceRecorder(path, "rlce")
    recorder.write([{"id": "3-0", "step": 3}], completed_steps=2)  # resumed from checkpoint-2: steps 3.. redone
    rows, skipped = read_jsonl_lenient(path)
    assert skipped == 0 and [r["id"] for r in rows] == ["1-0", "1-1", "2-0", "2-1", "3-0"]
    recorder.write([{"id": "3-1", "step": 3}], completed_steps=2)  # later writes only append
    assert [r["id"] for r in read_jsonl_lenient(path)[0]][-2:] == ["3-0", "3-1"]


def test_a_fresh_run_starts_a_fresh_trail_and_ids_are_per_step(tmp_path):
    path = tmp_path / "e.jsonl"
    EvidenceLog(path).write([{"id": "eval-0-0", "step": 0}, {"id": "1-0", "step": 1}])
    recorder = EvidenceRecorder(path, "rlce")
    assert recorder.next_ids("train", 1, 2) == ["1-0", "1-1"] and recorder.next_ids("train", 1, 1) == ["1-2"]
    assert recorder.next_ids("eval", 1, 1) == ["eval-1-0"]
    recorder.write([{"id": "1-0", "step": 1}], completed_steps=0)
    assert [r["id"] for r in read_jsonl_lenient(path)[0]] == ["1-0"]
    off = EvidenceRecorder(tmp_path / "off.jsonl", "rlce", enabled=False)
    assert off.record(None, None, "1-0", 1, "train") is None and off.write([None], 0) == 0
    assert not (tmp_path / "off.jsonl").exists()


def test_config_rejects_a_negative_size_limit(tmp_path):
    from testing_utils import tiny_grpo_args

    with pytest.raises(ValueError, match="rlce_evidence_max_mb must be >= 0"):
        tiny_grpo_args(tmp_path, rlce_evidence_max_mb=-1)


@pytest.mark.slow
def test_a_real_run_writes_the_trail_links_completions_and_resumes(tiny_model_dir, tmp_path):
    import pandas as pd
    from datasets import Dataset
    from testing_utils import preference_rows, tiny_grpo_args

    from rlce_trl import RLCEGRPOTrainer

    dataset = Dataset.from_list(preference_rows(16))
    args = tiny_grpo_args(tmp_path / "run", log_completions=True, save_strategy="steps", save_steps=1)
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=dataset)
    trainer.train()
    path = os.path.join(args.output_dir, "rlce_evidence.jsonl")
    rows, skipped = read_jsonl_lenient(path)
    assert skipped == 0 and [r["step"] for r in rows] == [1] * 4 + [2] * 4  # 16 rollouts / G=4 per step
    assert [r["id"] for r in rows[:4]] == ["1-0", "1-1", "1-2", "1-3"]
    assert sum(len(r["tests"]) for r in rows) > 0 and all(len(r["completions"]) == 4 for r in rows)
    assert all(t["verdict"] in {"yes", "no", "unknown", None} for r in rows for t in r["tests"])
    table = pd.read_parquet(max(glob.glob(os.path.join(args.output_dir, "completions", "*.parquet"))))
    assert set(table["rlce_group"]) == {r["id"] for r in rows if r["step"] == 2}
    assert os.path.exists(os.path.join(args.output_dir, "trainer_state.json"))

    resumed_args = tiny_grpo_args(tmp_path / "run", max_steps=3, save_strategy="no")
    resumed = RLCEGRPOTrainer(model=tiny_model_dir, args=resumed_args, train_dataset=dataset)
    resumed.train(resume_from_checkpoint=os.path.join(args.output_dir, "checkpoint-1"))
    again, _ = read_jsonl_lenient(path)
    assert [r["step"] for r in again] == [1] * 4 + [2] * 4 + [3] * 4  # step 2 redone once, not twice
    assert [r["id"] for r in again] == [f"{s}-{g}" for s in (1, 2, 3) for g in range(4)]


def test_a_rubric_baseline_keeps_its_rubrics():
    def reply(request):
        if request.stage == "rubric_seed":
            return json.dumps({"rubrics": [{"criterion": "Names the user's preference", "type": "positive"},
                                           {"criterion": "Ignores the user", "type": "negative"},
                                           {"criterion": "Is one sentence", "type": "positive"}]})
        return "2"

    scorer = build_scorer("rar", ScriptedVerifier(reply), PLAIN)
    group = Group("c", ["\\boxed{positive}", "\\boxed{negative}"], labels=LABELS)
    (result,), _ = scorer.score([group])
    record = group_record(group, result, group_id="1-0", step=1, method="rar", extra=scorer.record_details(group))
    rubrics = record["extra"]["rubrics"]["persistent"]
    assert rubrics[0]["text"] == "Names the user's preference" and record["status"] == "scored"
    assert scorer.record_details(Group("other", ["x"])) is None
