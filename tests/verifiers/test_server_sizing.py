"""The co-located verifier server as the trainer starts it from a recipe: sized for its requests (context length,
sequences per stage, no image / video inputs for a text recipe), an allow-listed environment, a configurable
start-up timeout and a port held until the server binds it. The server is the FAKE `vllm` package of
`fakes.make_fake_vllm` (fast; the real one: tests/verifiers/test_vllm_real.py and tests/slow/test_rehearsal.py)."""

from __future__ import annotations

import errno
import importlib.util
import socket
import sys
import time
from pathlib import Path
from unittest import mock

import pytest
from fakes import make_fake_vllm

from rlce_trl.config import RLCEGRPOConfig
from rlce_trl.verifiers.from_config import remote_verifier
from rlce_trl.verifiers.server import VerifierUnavailableError
from rlce_trl.verifiers.sizing import verifier_max_model_length, verifier_max_num_seqs
from rlce_trl.verifiers.vllm_process import VLLMServerProcess, child_environment

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    """`python -m vllm.entrypoints.openai.api_server` finds the fake package through PYTHONPATH (allow-listed)."""
    env = make_fake_vllm(tmp_path / "fake-vllm")
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    return env


def recipe_args(tmp_path, name="prefeval_rlce", *extra):
    """A shipped recipe through its script's parser and `prepare_run`, as `examples/train_*.py` runs it."""
    from rlce_trl.training.pipeline import prepare_run

    script = load_example("train_prefeval")
    argv = ["--config", str(CONFIGS / f"{name}.yaml"), "--bf16", "false", "--output_dir", str(tmp_path / "out"),
            "--verifier_vllm_python", sys.executable, *extra]
    script_args, training_args, model_args = script.make_parser().parse_args_and_config(argv)
    with mock.patch("rlce_trl.training.pipeline.check_model_source"):  # the recipe's Hub model is never loaded here
        prepare_run(script_args, training_args, model_args)
    return training_args


def flag(cmd: list[str], name: str) -> str | None:
    return cmd[cmd.index(name) + 1] if name in cmd else None


def test_recipe_verifier_length_covers_its_longest_request(tmp_path):
    args = recipe_args(tmp_path)
    # prompt filter 8,192 + 4 answers of <= 512 (+ slack) + template + longest reply (equivalence, 256)
    assert args.verifier_max_model_length == 8192 + 4 * (512 + 8) + 512 + 256
    # without the prompt filter the policy engine's context bounds the prompt: 8,704 - 512
    args.verifier_max_model_length = None
    assert verifier_max_model_length(args) == 8192 + 4 * 520 + 768
    # set by the user: taken as is
    assert recipe_args(tmp_path, "prefeval_rlce", "--verifier_max_model_length", "4096").verifier_max_model_length \
        == 4096


def test_colocated_server_command_is_sized_for_the_recipe(tmp_path, fake_vllm, monkeypatch):
    """Before: no --max-model-len (vLLM takes the checkpoint's 262,144-token context and refuses to start), vLLM's
    default 1,024 sequences, and image / video inputs reserved for a text recipe."""
    monkeypatch.setenv("WORLD_SIZE", "8")  # the 8 processes the recipe's batch comments count
    args = recipe_args(tmp_path)
    verifier = remote_verifier(args, "/nonexistent/checkpoint", multimodal=False)
    try:
        cmd = verifier.process.command()
    finally:
        verifier.close()
    assert flag(cmd, "--max-model-len") == str(args.verifier_max_model_length) == "11040"
    # 192 completions / (4 x 8 ranks) = 6 groups x 12 ordered pairs x 1 test, capped at the 64 requests in flight
    assert flag(cmd, "--max-num-seqs") == "64" == str(verifier_max_num_seqs(args))
    assert flag(cmd, "--limit-mm-per-prompt") == '{"image": 0, "video": 0}'
    assert flag(cmd, "--gpu-memory-utilization") == "0.18"
    args.per_device_train_batch_size = args.generation_batch_size = 4  # a small stage: its own size
    assert verifier_max_num_seqs(args, world_size=2) == 1 * 4 * 3 * 1


def test_a_video_recipe_keeps_the_multimodal_inputs_and_user_args_win(tmp_path, fake_vllm):
    args = recipe_args(tmp_path, "prefeval_rlce", "--verifier_vllm_args", "--max-num-seqs 7 --enforce-eager")
    verifier = remote_verifier(args, "/nonexistent/checkpoint", multimodal=True)
    try:
        cmd = verifier.process.command()
    finally:
        verifier.close()
    assert "--limit-mm-per-prompt" not in cmd
    assert cmd[-3:] == ["--max-num-seqs", "7", "--enforce-eager"]  # after the defaults: argparse keeps the last


def test_dataset_with_video_is_multimodal():
    from rlce_trl.verifiers.sizing import dataset_sends_media

    text = [{"prompt": [{"role": "user", "content": "hi"}]}]
    video = [{"prompt": [{"role": "user", "content": [{"type": "video", "source": "clip.mp4"},
                                                       {"type": "text", "text": "what happens?"}]}]}]
    assert not dataset_sends_media(text) and dataset_sends_media(video) and dataset_sends_media(None)


def test_child_environment_is_an_allow_list(monkeypatch):
    leaks = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "x",
             "MASTER_PORT": "29500", "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "ROLE_RANK": "0",
             "ROLE_NAME": "default", "ROLE_WORLD_SIZE": "2", "TORCHELASTIC_USE_AGENT_STORE": "True",
             "TORCHELASTIC_RUN_ID": "r", "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
             "VLLM_PORT": "51000", "VLLM_DP_RANK": "1", "VLLM_DP_SIZE": "2", "VLLM_DP_MASTER_PORT": "1",
             "ACCELERATE_MIXED_PRECISION": "bf16", "ACCELERATE_USE_DEEPSPEED": "true", "CROSS_RANK": "0",
             "SOME_SECRET_OF_THE_TRAINER": "s"}
    kept = {"PATH": "/bin", "HOME": "/root", "HF_HOME": "/hf", "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
            "CUDA_HOME": "/cuda", "NCCL_DEBUG": "INFO", "PYTORCH_CUDA_ALLOC_CONF": "x", "OMP_NUM_THREADS": "2",
            "PYTHONPATH": "/p", "TRANSFORMERS_VERBOSITY": "error"}
    for key, value in {**leaks, **kept}.items():
        monkeypatch.setenv(key, value)
    env = VLLMServerProcess("/ckpt", python=sys.executable, port=8000, devices="1",
                            env={"VLLM_CPU_KVCACHE_SPACE": "2"})._child_env()
    assert not set(leaks) & set(env), set(leaks) & set(env)
    assert {k: env[k] for k in kept if k != "VLLM_CPU_KVCACHE_SPACE"} == {k: v for k, v in kept.items()
                                                                          if k != "VLLM_CPU_KVCACHE_SPACE"}
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2" and env["CUDA_VISIBLE_DEVICES"] == "1"  # explicit `env` wins
    assert child_environment({"TORCHELASTIC_USE_AGENT_STORE": "True", "TORCH_HOME": "/t"}) == {"TORCH_HOME": "/t"}


def test_startup_timeout_is_a_config_field(tmp_path, monkeypatch):
    """Before: the error named a `verifier_startup_timeout` option that did not exist; the wait was 900 s fixed."""
    package = tmp_path / "never-healthy" / "vllm" / "entrypoints" / "openai"  # a server that never answers
    package.mkdir(parents=True)
    for folder in (package, package.parent, package.parent.parent):
        (folder / "__init__.py").write_text("")
    (package / "api_server.py").write_text("import time\ntime.sleep(120)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "never-healthy"))
    args = recipe_args(tmp_path, "prefeval_rlce", "--verifier_startup_timeout", "2")
    assert args.verifier_startup_timeout == 2.0
    start = time.monotonic()
    with pytest.raises(VerifierUnavailableError, match="verifier_startup_timeout"):
        remote_verifier(args, "/nonexistent/checkpoint", multimodal=False)
    assert time.monotonic() - start < 30
    assert RLCEGRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False).verifier_startup_timeout == 900.0
    with pytest.raises(ValueError, match="verifier_startup_timeout must be > 0"):
        RLCEGRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, verifier_startup_timeout=0)


def test_port_is_held_until_the_server_binds_it(fake_vllm):
    """Before: `free_port` closed the port at once, and anything could take it in the 10-20 s before vLLM binds."""
    process = VLLMServerProcess("/nonexistent/model", python=sys.executable, startup_timeout_s=20)
    other = socket.socket()
    with pytest.raises(OSError) as refused:
        other.bind(("127.0.0.1", process.port))  # held: no other bind gets it
    other.close()
    assert refused.value.errno == errno.EADDRINUSE
    for _ in range(200):  # nor does any free-port request
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            assert s.getsockname()[1] != process.port
    try:
        process.start()  # the child binds the held port (SO_REUSEADDR, as vLLM's server does) and answers
        assert process._held is None and process.is_alive()
    finally:
        process.stop()
