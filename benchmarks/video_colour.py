"""Learning benchmark: do the frames reach the gradient? A two-colour clip task with a gold reward.

Each clip is a few frames of one colour (red or blue, random shade and noise); the prompt asks for the colour and is
the same text for every clip, so only the frames tell the answer. The policy (the tiny random Qwen3.5 VLM of
tests/testing_utils.py, or `--model`) answers with one token, sampled among `R` and `B` (other tokens suppressed at
sampling; the loss still uses the full softmax); the gold reward is 1 for the right letter. Two runs from the same
initial weights:

- `video`: `video_input="video"` through `VideoGRPOMixin` (frames in generation and in every log-prob forward);
- `text`: the frame-stripped control (`video_input="text"`), which cannot beat chance.

Held-out accuracy is the greedy choice between `R` and `B` on unseen clips. Pass: video >= 0.8, control <= 0.6.

    python -m benchmarks.video_colour --steps 150            # CPU: a few minutes per run
    python -m benchmarks.video_colour --steps 150 --device cuda

Prints one JSON line per run: steps, seconds, seconds per step, held-out accuracy. Needs torchvision and PyAV.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

QUESTION = "What colour is this clip? Answer R for red or B for blue."
COLOURS = {"red": "R", "blue": "B"}


def write_clip(path: Path, colour: str, rng: random.Random, frames: int = 2, size: int = 64) -> None:
    import av
    import numpy as np

    base = {"red": (200, 40, 40), "blue": (40, 40, 200)}[colour]
    shade = np.array(base) + rng.randint(-40, 40)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=1)
        stream.width = stream.height = size
        stream.pix_fmt = "yuv420p"
        for _ in range(frames):
            noise = np.random.default_rng(rng.randint(0, 2**31)).integers(-25, 25, (size, size, 3))
            image = np.clip(shade + noise, 0, 255).astype(np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def make_rows(folder: Path, count: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for k in range(count):
        colour = "red" if k % 2 == 0 else "blue"
        name = f"{seed}-{k}-{colour}.mp4"
        write_clip(folder / name, colour, rng)
        rows.append({
            "prompt": [{"role": "user", "content": [{"type": "video", "text": None},
                                                    {"type": "text", "text": QUESTION}]}],
            "videos": [name],
            "gold": COLOURS[colour],
        })
    return rows


def gold_reward(completions, gold, **kwargs):
    return [1.0 if c[0]["content"].strip()[:1] == g else 0.0 for c, g in zip(completions, gold, strict=True)]


def held_out_accuracy(model, processor, rows, media, frame_kwargs, strip: bool) -> float:
    import torch

    from rlce_trl.data.hba import expand_videos
    from rlce_trl.data.media import text_only_prompt
    from rlce_trl.generation.generators import VisionLanguageGenerator

    tok = processor.tokenizer
    r_id, b_id = tok.convert_tokens_to_ids("R"), tok.convert_tokens_to_ids("B")
    encoder = VisionLanguageGenerator(model, processor)
    correct = 0
    model.eval()
    for row in rows:
        prompt = expand_videos(row, media, **frame_kwargs)["prompt"]
        if strip:
            prompt = text_only_prompt(prompt)
        batch = encoder.encode([prompt]).to(model.device)
        with torch.no_grad():
            logits = model(**batch).logits[0, -1]
        correct += ("R" if logits[r_id] > logits[b_id] else "B") == row["gold"]
    return correct / len(rows)


def run(mode: str, model_dir: str, train, test, media, args) -> dict:
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from rlce_trl.data.hba import with_frames
    from rlce_trl.trainer_video import VideoGRPOMixin

    class VideoGRPOTrainer(VideoGRPOMixin, GRPOTrainer):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self._video_setup()

    frame_kwargs = {"fps": 1.0, "min_frames": 2, "max_frames": 2, "size": (64, 64)}
    config = GRPOConfig(
        output_dir=str(Path(args.workdir) / mode), per_device_train_batch_size=args.batch, num_generations=4,
        max_completion_length=1, max_steps=args.steps, learning_rate=args.lr, beta=0.0, logging_steps=10,
        report_to="none", save_strategy="no", bf16=False, use_cpu=args.device == "cpu", seed=args.seed,
        gradient_checkpointing=False, temperature=1.0, top_k=0, top_p=1.0, disable_tqdm=True,
    )
    config.video_input = mode
    processor_tok = None
    dataset = with_frames(Dataset.from_list(train), media, **frame_kwargs)
    trainer = VideoGRPOTrainer(model=model_dir, reward_funcs=gold_reward, args=config, train_dataset=dataset)
    processor_tok = trainer.processing_class.tokenizer
    keep = {processor_tok.convert_tokens_to_ids("R"), processor_tok.convert_tokens_to_ids("B")}
    suppressed = [t for t in range(len(processor_tok)) if t not in keep]
    trainer.generation_config.suppress_tokens = suppressed
    trainer.generation_kwargs["suppress_tokens"] = suppressed
    before = held_out_accuracy(trainer.model, trainer.processing_class, test, media, frame_kwargs, mode == "text")
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    after = held_out_accuracy(trainer.model, trainer.processing_class, test, media, frame_kwargs, mode == "text")
    rewards = [e["reward"] for e in trainer.state.log_history if "reward" in e]
    del trainer
    torch.cuda.empty_cache() if torch.cuda.is_available() else None
    return {"mode": mode, "steps": args.steps, "seconds": round(seconds, 1),
            "seconds_per_step": round(seconds / max(args.steps, 1), 2), "held_out_accuracy_before": before,
            "held_out_accuracy": after, "train_reward_first_last": [rewards[0], rewards[-1]] if rewards else None}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--batch", type=int, default=16, help="completions per step (prompts x 4)")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--train", type=int, default=32, help="training clips")
    parser.add_argument("--test", type=int, default=32, help="held-out clips")
    parser.add_argument("--modes", default="video,text")
    parser.add_argument("--model", default=None, help="a vision-language checkpoint (default: the tiny random one)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="video-colour-")
    media = Path(args.workdir) / "media"
    media.mkdir(parents=True, exist_ok=True)
    train, test = make_rows(media, args.train, seed=1), make_rows(media, args.test, seed=2)
    model_dir = args.model
    if model_dir is None:
        from tests.testing_utils import build_tiny_vlm  # the tiny VLM of the tests

        model_dir = str(build_tiny_vlm(Path(args.workdir) / "tiny-vlm", seed=args.seed))
    results = [run(mode, model_dir, train, test, media, args) for mode in args.modes.split(",")]
    for result in results:
        print(json.dumps(result))
    by_mode = {r["mode"]: r["held_out_accuracy"] for r in results}
    ok = by_mode.get("video", 1.0) >= 0.8 and by_mode.get("text", 0.0) <= 0.6
    print(json.dumps({"pass": ok, **{f"{m}_accuracy": a for m, a in by_mode.items()}}))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
