"""Two processes whose rollout groups straddle the ranks: each group is scored once, with all its members."""

import json
import os
import subprocess
import sys
from collections import Counter

from testing_utils import free_port

HERE = os.path.dirname(__file__)



def test_groups_straddling_two_processes_are_scored_once_and_whole(tiny_model_dir, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    tests = os.path.dirname(HERE)  # testing_utils.py
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(filter(None, [HERE, tests, env.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), os.path.join(HERE, "straddle_run.py"), tiny_model_dir, str(tmp_path)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]

    # The layout the test is about: 12 completions of 3 prompts, 6 per rank, so one prompt's group is split.
    local = [Counter(r["local_prompts"]) for r in ranks]
    split = [p for p in local[0] if p in local[1]]
    assert len(split) == 1 and local[0][split[0]] + local[1][split[0]] == 4

    # Every group scored exactly once over both ranks, always with all G = 4 members.
    scored = [g for r in ranks for g in r["scored"]]
    assert sorted(Counter(g["context"] for g in scored).values()) == [1, 1, 1]
    assert all(g["size"] == 4 for g in scored)
    assert any(split[0] in g["context"] for g in scored)
    # Both ranks end with the same gathered rewards, and the same logged metrics.
    assert ranks[0]["rewards"] == ranks[1]["rewards"] and len(ranks[0]["rewards"]) == 12
    assert ranks[0]["logged"][0]["rlce/distinct_answers_mean"] == ranks[1]["logged"][0]["rlce/distinct_answers_mean"]
    # The evidence trail: written once, by the main process after the gather, one record per group in group order.
    from rlce_trl.data.jsonl import read_jsonl_lenient

    trail, skipped = read_jsonl_lenient(tmp_path / "rlce_evidence.jsonl")
    assert skipped == 0 and [r["id"] for r in trail] == ["1-0", "1-1", "1-2"]
    assert sorted(r["context"] for r in trail) == sorted(g["context"] for g in scored)
    assert all(len(r["completions"]) == 4 for r in trail)
