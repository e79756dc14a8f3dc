"""The one credential scrubber (`rlce_trl.credentials`) and the places that must use it."""

from __future__ import annotations

import json
import pickle

import pytest

from rlce_trl.credentials import clean_url, scrub, scrub_value


@pytest.mark.parametrize(
    "text, secret",
    [
        ("see http://user:pass1234@host:8000/v1 now", "pass1234"),
        ("https://api.example.com/v1?api_key=abcdef123456&x=1", "abcdef123456"),
        ("Authorization: Bearer sk-live-0123456789abcdef", "sk-live-0123456789abcdef"),
        ("token hf_ABCDEFGHIJKLMNOPQRSTUV leaked", "hf_ABCDEFGHIJKLMNOPQRSTUV"),
        ("key sk-proj-ABCDEFGHIJKLMNOP1234", "sk-proj-ABCDEFGHIJKLMNOP1234"),
        ("{'Authorization': 'Basic dXNlcjpwYXNz'}", "dXNlcjpwYXNz"),
        ("http://a:b@[::1]:8000/v1", "a:b@"),
    ],
)
def test_scrub_removes_the_secret(text, secret):
    assert secret not in scrub(text)


def test_scrub_keeps_ordinary_text_and_urls():
    text = "http://127.0.0.1:8000/v1 answered HTTP 503 after 2 attempts"
    assert scrub(text) == text
    assert clean_url("http://u:p@host:81/v1?sig=1#f") == "http://host:81/v1"


def test_secret_environment_values_are_scrubbed_anywhere(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "correct-horse-battery")
    monkeypatch.setenv("SOME_FLAG", "correct")  # not a secret name: left alone
    assert scrub("reply quoted correct-horse-battery back") == "reply quoted <redacted> back"
    assert scrub("correct") == "correct"


def test_scrub_value_by_name_and_nested():
    value = {"api_key": "abc123xyz", "api_key_env": "OPENAI_API_KEY", "urls": ["http://u:pw999@h/v1"],
             "headers": {"Authorization": "Basic Zm9vOmJhcg=="}, "n": 3}
    out = scrub_value(value)
    assert out["api_key"] == "<redacted>" and out["api_key_env"] == "OPENAI_API_KEY" and out["n"] == 3
    assert out["urls"] == ["http://h/v1"] and out["headers"]["Authorization"] == "<redacted>"
    plain = {"include_num_input_tokens_seen": "no"}
    assert scrub_value(plain, by_name=False) == plain


def test_config_serialisations_carry_no_credentials(tmp_path, monkeypatch):
    from rlce_trl import RLCEGRPOConfig

    monkeypatch.setenv("HF_TOKEN_FOR_TEST", "hf_SECRETSECRETSECRET123")
    config = RLCEGRPOConfig(
        str(tmp_path), bf16=False, use_cpu=True, report_to="none", verifier_mode="server",
        verifier_server_base_url="http://user:hunter2secret@10.0.0.1:8000/v1,http://10.0.0.2:8000?api_key=qwerty9876",
        hub_token="hf_SECRETSECRETSECRET123",
    )
    for text in (json.dumps(config.to_dict()), config.to_json_string(), str(config.to_sanitized_dict()),
                 pickle.dumps(config).decode("latin-1"), str(config), repr(config)):
        assert "hunter2secret" not in text and "qwerty9876" not in text and "hf_SECRETSECRETSECRET123" not in text
    assert config.to_dict()["verifier_server_base_url"] == "http://10.0.0.1:8000/v1,http://10.0.0.2:8000"
    assert config.to_dict()["include_num_input_tokens_seen"] == config.include_num_input_tokens_seen
    assert "hunter2secret" in config.verifier_server_base_url  # the live object keeps what it needs to connect


def test_config_deadline_and_reply_cap_are_checked(tmp_path):
    from rlce_trl import RLCEGRPOConfig

    with pytest.raises(ValueError) as info:
        RLCEGRPOConfig(str(tmp_path), bf16=False, use_cpu=True, verifier_request_deadline=0,
                       verifier_max_reply_bytes=10)
    assert "verifier_request_deadline" in str(info.value) and "verifier_max_reply_bytes" in str(info.value)


def test_the_cli_error_line_is_scrubbed(capsys, tmp_path):
    from rlce_trl.cli import main

    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"id": 1, "task": "prefeval", "prompt": "q", "gold": "g"}) + "\n")
    code = main(["evaluate", "--model_name_or_path", str(tmp_path / "none"), "--data", str(data), "--output_dir",
                 str(tmp_path / "out"), "--judge_base_url", "http://me:hunter2secret@127.0.0.1:9/v1"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "hunter2secret" not in err
