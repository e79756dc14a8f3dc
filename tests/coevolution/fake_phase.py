"""A FAKE phase process for the driver tests: it stands in for `python -m rlce_trl.coevolution.phase` (which trains
a real model) and runs in milliseconds. Its outputs are hashes of its inputs' contents, so a resumed run can be
compared with an uninterrupted one, and it records every start and end in a ledger ($FAKE_LEDGER).

Environment: FAKE_PHASE_SLEEP (seconds a train step takes), FAKE_PHASE_FAIL (a step id that exits 3),
FAKE_BUILD_EMPTY (a build step id that retains no rows and reports `skip`)."""

import hashlib
import json
import os
import sys
import time
from pathlib import Path


def content(path):
    if path is None:
        return "none"
    p = Path(path)
    if p.is_dir():
        p = p / "weights.txt"
    return p.read_text() if p.exists() else f"initial:{Path(path).name}"


def digest(*parts):
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:12]


def main():
    job = json.loads(Path(sys.argv[sys.argv.index("--job") + 1]).read_text())
    out = Path(job["output_dir"])
    ledger = os.environ.get("FAKE_LEDGER")

    def note(event):
        if ledger:
            with open(ledger, "a") as f:
                f.write(f"{event} {job['step']}\n")

    note("start")
    if os.environ.get("FAKE_PHASE_FAIL") == job["step"]:
        print("Traceback: something broke in the fake phase", flush=True)
        sys.exit(3)
    if job["kind"] == "train":
        time.sleep(float(os.environ.get("FAKE_PHASE_SLEEP", "0")))
        phase = job["phase"]
        weights = digest(phase["name"], str(job["round"]), content(job["start_model"]), content(job["data_file"]),
                         content(job.get("partner")))
        (out / "model").mkdir(parents=True)
        (out / "model" / "weights.txt").write_text(weights)
        (out / "model" / "job.json").write_text(json.dumps(job))
        result = {"checkpoint": str(out / "model")}
    elif job["kind"] == "build":  # RLAC's harvest: one row per "clip" from the generator checkpoint
        source = job["checkpoints"].get("generator") or job["checkpoints"]["questioner"]
        response = content(source)
        rows = [{"prompt": [{"role": "user", "content": "critique"}], "rlac_response": response,
                 "rlac_context": "ctx"}] * 2
        if os.environ.get("FAKE_BUILD_EMPTY") == job["step"]:  # a build that retained nothing (the driver skips)
            rows = []
        Path(job["data_file"]).write_text("".join(json.dumps(r) + "\n" for r in rows))
        result = {"pairs": len(rows), "generator": response}
        if not rows:
            result["skip"] = "no rows retained: 0 of 2 generated questions parsed"
    else:
        score = int(digest(content(job["model"])), 16) % 97 / 97
        result = {"score": score}
    (out / "report.json").write_text(json.dumps({"ok": True, "gpus": 0, "result": result}))
    note("end")


if __name__ == "__main__":
    main()
