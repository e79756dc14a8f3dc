"""GPU check of video training (issue 11), one prepared script, a few minutes on one GPU.

1. V-2 parity: the log-prob tests of tests/vlm/test_video_training.py (training log-probs == a direct forward, fp32,
   1e-5; perturbing the frames changes them; train/eval prompt ids identical).
2. Speed: seconds per GRPO step of the tiny Qwen3.5 VLM on CUDA for 8 prompts x G=4 x 8-frame clips (176x320),
   `video_input="video"` (transformers generation, frames in every forward).
3. V-7 learning: benchmarks/video_colour.py on CUDA (default 150 steps): video >= 0.8 held-out, control <= 0.6.

    python -m tools.gpu_check_video [--steps 150] [--skip_tests]

Needs CUDA, torchvision, PyAV and this package. Prints one JSON line per part and exits non-zero on a failure.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parity() -> dict:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-m", "vlm", "-p", "no:cacheprovider", "-k", "logprobs or prompts",
         str(ROOT / "tests" / "vlm" / "test_video_training.py")],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    return {"part": "parity", "ok": done.returncode == 0, "seconds": round(time.perf_counter() - start, 1),
            "tail": done.stdout.strip().splitlines()[-1:] if done.stdout else done.stderr[-300:]}


def speed(steps: int = 3) -> dict:
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from rlce_trl.data.hba import with_frames
    from rlce_trl.trainer_video import VideoGRPOMixin
    from tests.testing_utils import build_tiny_vlm, make_video  # the tiny VLM and the clip writer of the tests

    class VideoGRPOTrainer(VideoGRPOMixin, GRPOTrainer):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self._video_setup()

    work = Path(tempfile.mkdtemp(prefix="gpu-video-"))
    model = build_tiny_vlm(work / "tiny-vlm")
    rows = []
    for k in range(8):
        make_video(work / f"c{k}.mp4", seconds=12)  # 8 frames at 1 fps
        rows.append({"prompt": [{"role": "user", "content": [{"type": "video", "text": None},
                                                            {"type": "text", "text": f"Clip {k}: describe it."}]}],
                     "videos": [f"c{k}.mp4"]})
    config = GRPOConfig(output_dir=str(work / "out"), per_device_train_batch_size=32, num_generations=4,
                        max_completion_length=32, max_steps=steps, bf16=True, report_to="none", save_strategy="no",
                        logging_steps=1, disable_tqdm=True)
    trainer = VideoGRPOTrainer(model=str(model), reward_funcs=lambda completions, **k: [float(len(str(c)) % 3)
                                                                                      for c in completions],
                               args=config, train_dataset=with_frames(Dataset.from_list(rows), work))
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    step_times = [e["step_time"] for e in trainer.state.log_history if "step_time" in e]
    return {"part": "speed", "ok": trainer.state.global_step == steps, "device": torch.cuda.get_device_name(0),
            "prompts": 8, "G": 4, "frames": 8, "seconds": round(seconds, 1), "step_times": step_times,
            "max_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)}


def learning(steps: int) -> dict:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "benchmarks.video_colour", "--steps", str(steps),
                           "--device", "cuda"], cwd=ROOT, capture_output=True, text=True, check=False)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {"part": "learning", "ok": done.returncode == 0, "seconds": round(time.perf_counter() - start, 1),
            "results": lines or done.stderr[-500:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=150, help="steps of the learning benchmark")
    parser.add_argument("--skip_tests", "--skip-tests", action="store_true")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print(json.dumps({"ok": False, "error": "no CUDA device: run this on a GPU machine"}))
        return 2
    parts = [] if args.skip_tests else [parity()]
    parts += [speed(), learning(args.steps)]
    for part in parts:
        print(json.dumps(part))
    return 0 if all(p["ok"] for p in parts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
