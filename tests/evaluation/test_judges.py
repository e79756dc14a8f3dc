import re

import pytest

from rlce_trl.evaluation.judges import (
    OpenAIJudgeClient,
    judge_against_reference,
    judge_prefeval,
    load_prefeval_judge_prompts,
    parse_check,
    parse_json_verdict,
    prefeval_error_types,
    summarize_prefeval,
)


def xml(answer, preference=None):
    head = f"<preference>{preference}</preference>\n" if preference is not None else "<explanation>ok</explanation>\n"
    return f"{head}<answer>{answer}</answer>"


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"correct": true, "explanation": "same intent"}', True),
        ('```json\n{"correct": false, "explanation": "no"}\n```', False),
        ('Sure. {"correct": "yes", "explanation": ""}', True),
        ("The answer is correct.", None),
        ('{"explanation": "missing"}', None),
    ],
)
def test_parse_json_verdict(text, expected):
    parsed = parse_json_verdict(text)
    assert (parsed["correct"] if parsed else None) == expected


def test_parse_check_replies():
    assert parse_check("acknowledge", xml("[Yes]", "Since you avoid gluten")) == {
        "answer": "yes",
        "quote": "Since you avoid gluten",
    }
    assert parse_check("helpful", xml("No.")) == {"answer": "no"}
    assert parse_check("violation", "Yes, it violates.") is None  # no <answer> tag
    assert parse_check("violation", xml("Maybe")) is None


@pytest.mark.parametrize(
    "ack, hall, viol, helpful, error",
    [
        (True, False, False, True, None),
        (False, False, False, True, None),  # unaware but no violation: fine
        (False, False, True, True, "preference_unaware_violation"),
        (True, True, True, True, "hallucinated_preference_violation"),
        (True, False, True, True, "inconsistent"),
        (True, False, False, False, "unhelpful"),
        (False, False, True, False, "unhelpful"),  # unhelpful takes precedence over the violation types
        (False, True, True, True, "preference_unaware_violation"),  # hallucination only counts after acknowledgement
    ],
)
def test_prefeval_error_types(ack, hall, viol, helpful, error):
    types = prefeval_error_types(ack, hall, viol, helpful)
    assert [k for k, v in types.items() if v and k != "correct"] == ([error] if error else [])
    assert types["correct"] == (error is None)


def test_intentqa_judge_retries_and_unjudged(fake_judge, monkeypatch):
    def script(prompt, index):
        if "Predicted answer:\nA" in prompt:
            return '{"correct": true, "explanation": "same"}'
        if "Predicted answer:\nB" in prompt:
            return '{"correct": false, "explanation": "different"}'
        if "Predicted answer:\nC" in prompt:  # first reply garbled, then HTTP error (retried by the client), parses
            calls = sum("Predicted answer:\nC" in r["messages"][-1]["content"] for r in server.requests)
            return {1: "not json", 2: 500}.get(calls, '{"correct": true, "explanation": "ok"}')
        return "I refuse to answer in JSON."

    server = fake_judge(script)
    monkeypatch.setenv("JUDGE_TEST_KEY", "sk-test-123")
    client = OpenAIJudgeClient(server.base_url, "judge", api_key_env="JUDGE_TEST_KEY", concurrency=1)
    items = [{"question": "Why?", "gold": "g", "prediction": p} for p in ("A", "B", "C", "D")] + [
        {"question": "Why?", "gold": "g", "prediction": None}
    ]
    results = judge_against_reference(client, items)
    assert [r["correct"] for r in results] == [True, False, True, None, False]
    assert [r["attempts"] for r in results] == [1, 1, 2, 4, 0]
    assert not any(r["judge_failed"] for r in results)
    assert len(server.requests) == 1 + 1 + 3 + 4  # no call for a missing prediction
    assert all(h.get("Authorization") == "Bearer sk-test-123" for h in server.headers)
    assert "sk-test-123" not in repr(client)


def test_no_key_no_header(fake_judge, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = fake_judge(lambda prompt, i: '{"correct": true}')
    client = OpenAIJudgeClient(server.base_url, "m")
    judge_against_reference(client, [{"question": "q", "gold": "g", "prediction": "p"}])
    assert "Authorization" not in server.headers[0]


def test_unreachable_endpoint_is_unjudged():
    client = OpenAIJudgeClient("http://user:hunter2secret@127.0.0.1:9/v1", "m", timeout=2, concurrency=1,
                               backoff=0.01)
    [result] = judge_against_reference(client, [{"question": "q", "gold": "g", "prediction": "p"}], max_attempts=2)
    assert result["correct"] is None and "failed" in result["judge_error"] and result["judge_failed"]
    assert "127.0.0.1:9" in result["judge_error"] and "hunter2secret" not in result["judge_error"]


def test_a_trickling_judge_is_cut_at_its_deadline_and_a_huge_reply_refused(fake_judge):
    import time

    server = fake_judge(lambda prompt, i: '{"correct": true}')
    client = OpenAIJudgeClient(server.base_url, "m", timeout=5, deadline=1.0, max_retries=0, concurrency=1)
    server.trickle_s = 0.3  # a hostile endpoint: headers at once, then one byte every 0.3 s
    try:
        start = time.monotonic()
        [result] = judge_against_reference(client, [{"question": "q", "gold": "g", "prediction": "p"}])
        assert time.monotonic() - start < 2.5
        assert result["judge_failed"] and "deadline" in result["judge_error"]
    finally:
        server.trickle_s = 0.0
    big = OpenAIJudgeClient(server.base_url, "m", max_reply_bytes=64, max_retries=0, concurrency=1)
    [result] = judge_against_reference(big, [{"question": "q", "gold": "g", "prediction": "p" * 10}])
    assert result["judge_failed"] and "exceeds the cap of 64 bytes" in result["judge_error"]


def _prefeval_script(prompt, index):
    check = re.search(r"CHECK=(\w+)", prompt).group(1)
    response = re.search(r"R: (.*)", prompt).group(1) if "R: " in prompt else ""
    if check == "hallucination":
        return xml("Yes") if "wrongly" in prompt else xml("No")
    kind = response.split()[0]
    table = {
        # kind: (acknowledge reply, violation, helpful)
        "good": (xml("Yes", "Since you are vegan"), "No", "Yes"),
        "unaware": (xml("No", ""), "Yes", "Yes"),
        "halluc": (xml("Yes", "Since you wrongly love meat"), "Yes", "Yes"),
        "incons": (xml("Yes", "Since you are vegan"), "Yes", "Yes"),
        "unhelp": (xml("No", ""), "No", "No"),
        "emptyq": (xml("Yes", ""), "No", "Yes"),  # acknowledged but nothing quoted: no hallucination check
        "garbled": (xml("Yes", "Since you are vegan"), "No", "I cannot say"),
    }
    ack, violation, helpful = table[kind]
    return {
        "acknowledge": ack,
        "violation": xml(violation),
        "helpful": helpful if kind == "garbled" else xml(helpful),
    }[check]


def test_prefeval_judge(fake_judge, stand_in_prefeval):
    server = fake_judge(_prefeval_script)
    prompts = load_prefeval_judge_prompts(stand_in_prefeval)
    client = OpenAIJudgeClient(server.base_url, "judge", concurrency=4)
    kinds = ["good", "unaware", "halluc", "incons", "unhelp", "emptyq", "garbled"]
    items = [{"question": "What should I cook?", "gold": "I am vegan.", "prediction": f"{k} response"} for k in kinds]
    items.append({"question": "q", "gold": "p", "prediction": ""})
    results = judge_prefeval(client, items, prompts, max_attempts=2)
    by_kind = dict(zip(kinds + ["none"], results, strict=True))
    assert by_kind["good"]["correct"] and by_kind["good"]["hallucination"] == "no"
    assert by_kind["unaware"]["preference_unaware_violation"] and not by_kind["unaware"]["correct"]
    assert by_kind["halluc"]["hallucinated_preference_violation"]
    assert by_kind["incons"]["inconsistent"]
    assert by_kind["unhelp"]["unhelpful"] and by_kind["unhelp"]["hallucination"] == "skipped"
    assert by_kind["emptyq"]["hallucination"] == "skipped" and by_kind["emptyq"]["correct"]
    garbled = by_kind["garbled"]
    assert garbled["parse_failure"] and garbled["helpful"] is None and garbled["helpful_attempts"] == 2
    assert garbled["helpful_reply"] == "I cannot say"  # the unparsed reply is kept for reading
    assert "<answer>No</answer>" in by_kind["good"]["violation_reply"]
    assert not garbled["correct"] and garbled["correct_prefeval_rule"]  # PrefEval itself would count it correct
    assert not by_kind["none"]["correct"] and by_kind["none"]["no_answer"]
    # hallucination is asked only for the acknowledged rows that quoted something: good, halluc, incons, garbled
    asked = [
        r["messages"][-1]["content"] for r in server.requests if "CHECK=hallucination" in r["messages"][-1]["content"]
    ]
    assert len(asked) == 4 and any("S: Since you wrongly love meat" in a for a in asked)
    summary = summarize_prefeval(results)
    assert summary["num_rows"] == 8 and summary["parse_failures"] == 1
    assert summary["accuracy"] == pytest.approx(2 / 8)
    assert summary["accuracy_prefeval_rule"] == pytest.approx(3 / 8)
    assert summary["error_inconsistent"] == pytest.approx(1 / 8)


def test_missing_prompts_say_where_to_get_them(tmp_path):
    with pytest.raises(FileNotFoundError, match="amazon-science/PrefEval"):
        load_prefeval_judge_prompts(tmp_path)


def test_real_prompts_fill_every_slot(real_prefeval):
    if not (real_prefeval / "error_type").is_dir():
        pytest.skip(f"no error_type/ prompts in {real_prefeval}")
    from rlce_trl.evaluation.judges import prefeval_check_messages

    prompts = load_prefeval_judge_prompts(real_prefeval)
    for check in prompts:
        [message] = prefeval_check_messages(check, prompts, "QQ", "PP", "RR", "SS")
        assert not re.search(r"\{(question|end_generation|preference|assistant_restatement)\}", message["content"])
        assert "<answer>" in message["content"]
