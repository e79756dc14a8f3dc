"""state.json (atomic writes, unreadable files), the partner config and a partner server that is down, and the
one-line errors of `rlce-trl coevolve`."""

import json
import socket
import time

import pytest

from rlce_trl.cli import main
from rlce_trl.coevolution.state import new_state, read_state, totals, write_state
from rlce_trl.errors import InputError
from rlce_trl.verifiers.base import VerifierUnavailableError


def test_state_roundtrip_and_atomic_write(tmp_path, monkeypatch):
    state = new_state("rlac", "base", ("generator", "critic"), 5, "generator")
    write_state(tmp_path, state)
    assert read_state(tmp_path) == state and read_state(tmp_path / "none") is None
    state["steps"].append({"wall_s": 7200.0, "cpu_s": 3600.0, "device_hours": 6.0})
    state["steps"].append({"wall_s": 3600.0, "cpu_s": 1800.0, "device_hours": 3.0})
    assert totals(state) == {"wall_s": 10800.0, "cpu_s": 5400.0, "device_hours": 9.0, "cpu_hours": 1.5}

    def torn(*args, **kwargs):  # a crash between writing the temporary file and the rename
        raise KeyboardInterrupt

    monkeypatch.setattr("rlce_trl.coevolution.state.os.replace", torn)
    with pytest.raises(KeyboardInterrupt):
        write_state(tmp_path, state)
    assert read_state(tmp_path)["steps"] == []  # the old state, whole
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temporary file left


def test_unreadable_state_is_one_line(tmp_path):
    (tmp_path / "state.json").write_text("{torn")
    with pytest.raises(InputError, match="not a co-evolution state file"):
        read_state(tmp_path)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_partner_server_down_fails_fast():
    from rlce_trl import RLCEGRPOConfig
    from rlce_trl.verifiers.partner import server_partner

    url = f"http://127.0.0.1:{_closed_port()}"
    args = RLCEGRPOConfig("out", partner_mode="server", partner_server_base_url=url, use_cpu=True, bf16=False,
                          report_to="none")
    start = time.monotonic()
    with pytest.raises(VerifierUnavailableError) as caught:
        server_partner(args)
    assert time.monotonic() - start < 15
    message = str(caught.value)
    assert f"partner server at {url}" in message and "partner_mode='transformers'" in message


def test_partner_config_problems():
    from rlce_trl import RLCEGRPOConfig

    with pytest.raises(ValueError, match="partner_mode='server' needs partner_server_base_url"):
        RLCEGRPOConfig("out", partner_mode="server", use_cpu=True, bf16=False, report_to="none")
    with pytest.raises(ValueError, match="partner_mode='whatever'"):
        RLCEGRPOConfig("out", partner_mode="whatever", use_cpu=True, bf16=False, report_to="none")
    with pytest.raises(ValueError, match="set partner_mode='server'"):
        RLCEGRPOConfig("out", partner_server_base_url="http://x", use_cpu=True, bf16=False, report_to="none")


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps({"id": "a", "prompt": [{"role": "user", "content": "q"}]}) + "\n")
    return str(path)


@pytest.mark.parametrize("argv, expected", [
    (["--config", "quickstart_rlac", "--output_dir", "o"], "the following arguments are required: --method"),
    (["--method", "nope", "--config", "quickstart_rlac", "--train_file", "{corpus}", "--output_dir", "o"],
     "--method 'nope': use one of rlac, visplay, video_zero"),
    (["--method", "rlac", "--config", "no_such_recipe", "--train_file", "{corpus}", "--output_dir", "o"],
     "No recipe 'no_such_recipe'"),
    (["--method", "rlac", "--config", "quickstart_rlac", "--train_file", "missing.jsonl", "--output_dir", "o"],
     "--train_file 'missing.jsonl' does not exist"),
    (["--method", "rlac", "--config", "quickstart_rlac", "--output_dir", "o"], "--train_file is required"),
    (["--method", "rlac", "--config", "quickstart_rlac", "--train_file", "{corpus}", "--output_dir", "o",
      "--no_such_key", "1"], "unknown argument '--no_such_key'"),
    (["--method", "rlac", "--config", "quickstart_rlac", "--train_file", "{corpus}", "--output_dir", "o",
      "--coevolve_rounds", "0"], "coevolve_rounds=0"),
    (["--method", "rlac", "--config", "quickstart_rlac", "--train_file", "{corpus}", "--validation_file", "{corpus}",
      "--output_dir", "o"], "row 1 has no prompt or gold"),
    (["--method", "visplay", "--config", "quickstart_visplay", "--train_file", "{corpus}", "--output_dir", "o",
      "--partner_mode", "server", "--partner_server_base_url", "http://127.0.0.1:9/v1"],
     "partner_mode: server serves one fixed model"),
])
def test_cli_errors_are_one_line(argv, expected, corpus, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["coevolve", *[a.format(corpus=corpus) for a in argv]])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    assert expected in err


def test_cli_refuses_a_recipe_of_another_method(corpus, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["coevolve", "--method", "video_zero", "--config", "quickstart_rlac", "--train_file", corpus,
                 "--output_dir", "o"])
    assert code == 2 and "written for rlac" in capsys.readouterr().err


def test_train_refuses_a_coevolution_recipe(capsys):
    assert main(["train", "--config", "quickstart_rlac"]) == 2
    assert "rlce-trl coevolve --method rlac" in capsys.readouterr().err


@pytest.mark.parametrize("backend", [["--ddp_backend", "gloo"], ["--ddp_backend=gloo"]])
def test_the_driver_parses_a_recipe_meant_for_a_gloo_launch(backend, tmp_path):
    """`--ddp_backend gloo` (CPU launches) is for the train phases: the driver's own parse of the recipe and the
    single-process build / validate steps drop it (in one process accelerate would look for a process group nobody
    started); the train phases still receive it."""
    from rlce_trl.cli.coevolve import _parse_recipe
    from rlce_trl.coevolution.phase import parse_job_args, without_backend
    from rlce_trl.training.recipes import resolve_recipe

    overrides = [*backend, "--bf16", "false", "--use_cpu", "false"]
    _, training_args, _ = _parse_recipe(resolve_recipe("quickstart_rlac"), overrides, str(tmp_path))
    assert training_args.ddp_backend is None
    assert without_backend(overrides) == ["--bf16", "false", "--use_cpu", "false"]
    job = {"recipe": str(resolve_recipe("quickstart_rlac")), "output_dir": str(tmp_path / "step"),
           "extra_args": overrides}
    assert parse_job_args(job)[1].ddp_backend is None  # a build or validate step
