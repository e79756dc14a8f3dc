"""Two CPU processes: the ZeRO-3 recipe path (accelerate + DeepSpeed, RLCE reward, checkpoint reloaded) and
`push_to_hub` from every rank against a local stand-in of the Hub's HTTP API (the real Hub cannot be reached here)."""

import json
import sys

import pytest
from helpers import CONFIGS, TINY, clean_env, launch, torchrun
from hub_standin import HubStandIn
from testing_utils import free_port

pytestmark = pytest.mark.slow


def tiny_quickstart(model, out, *extra):
    return ["train_prefeval", "--config", str(CONFIGS / "quickstart.yaml"), "--model_name_or_path", model,
            "--output_dir", str(out), "--max_steps", "2", "--save_steps", "2", *TINY, *extra]


def test_zero3_two_processes_two_steps_and_reload(tiny_model_dir, tmp_path):
    pytest.importorskip("deepspeed")
    out = tmp_path / "z3"
    launcher = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
                str(CONFIGS / "accelerate" / "zero3.yaml"), "--num_processes", "2", "--mixed_precision", "no",
                "--main_process_port", str(free_port())]
    done = launch(launcher, tiny_quickstart(tiny_model_dir, out, "--use_cpu", "false", "--ddp_backend", "gloo"),
                  clean_env())
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    for facts in ranks:
        assert facts["num_processes"] == 2 and facts["deepspeed"] and facts["zero_stage"] == 3
        assert facts["policy_sharded"]  # the policy really is partitioned
        # the verifier is a whole, unsharded copy on every rank, and it was asked
        assert not facts["verifier_sharded"] and not facts["verifier_is_policy"] and facts["verifier_finite"]
        assert facts["steps"] == 2
    assert ranks[0]["verifier_numel"] == ranks[1]["verifier_numel"] > 0
    assert ranks[0]["verifier_calls"] > 0 or any("rewards/rlce_format/mean" in e for e in ranks[0]["log_history"])
    # the checkpoint and the final model reload as ordinary transformers models, with trained weights
    import torch
    from transformers import AutoModelForCausalLM

    initial = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    for folder in (out / "checkpoint-2", out):
        trained = AutoModelForCausalLM.from_pretrained(folder)
        pairs = zip(initial.state_dict().values(), trained.state_dict().values(), strict=True)
        assert any(not torch.equal(a, b) for a, b in pairs)
    assert (out / "checkpoint-2" / "trainer_state.json").exists()


def test_push_to_hub_from_every_rank_against_a_stand_in(tiny_model_dir, tmp_path):
    token = "hf_StandInTokenThatMustNeverBeSaved0123"
    out = tmp_path / "hub"
    with HubStandIn() as hub:
        env = clean_env(HF_ENDPOINT=hub.url, HF_HUB_OFFLINE="0", HF_HUB_DISABLE_XET="1")
        args = tiny_quickstart(tiny_model_dir, out, "--use_cpu", "true", "--push_to_hub", "true",
                               "--hub_model_id", "rlce-org/tiny-rlce", "--hub_token", token,
                               "--hub_strategy", "every_save")
        done = launch(torchrun(2), args, env, timeout=900)  # a hang would time out here
        assert done.returncode == 0, done.stderr[-4000:]
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["hub_model_id"] == "rlce-org/tiny-rlce" and ranks[0]["num_processes"] == 2
    assert ("POST", "/api/repos/create") in hub.requests
    assert hub.commits and all(c["repo"] == "rlce-org/tiny-rlce" for c in hub.commits)
    files = hub.repos["rlce-org/tiny-rlce"]
    assert {"README.md", "config.json", "model.safetensors", "training_args.bin"} <= set(files)
    card = files["README.md"].decode()
    for needle in ("RLCE", "Verifier model", "Verifier mode", "`transformers`", "rlce-trl preference sample",
                   "`quickstart.yaml`", "Reinforcement Learning with Comparative Evidence for Social Intelligence"):
        assert needle in card, needle
    # the token authenticated the uploads but appears in no uploaded file and no saved file
    assert any(h and token in h for h in hub.auth_headers)
    assert all(token.encode() not in content for content in files.values())
    for path in out.rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path
    assert hub.url.encode() not in files["README.md"]
