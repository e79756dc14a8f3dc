"""Human Behavior Atlas (HBA) video tasks as GRPO-ready rows: MOSEI-Sentiment, UR-FUNNY and IntentQA.

HBA ships each split as JSONL rows with `problem` (the question text, holding a `<video>` line, an `<audio>` line, for
MOSEI and UR-FUNNY the transcript, and the question), `answer` (the gold label or free text) and `videos` (clip paths
relative to a media root). Following appendix A of the paper:

- the `<audio>` line is removed (vision-language policies get frames and text only);
- the `<video>` line becomes a video content block, filled with frames sampled at 1 fps, clamped to 2..8 frames and
  rounded down to an even count (the temporal patch of Qwen-VL models is 2 frames), resized to 176x320 (height x
  width; the processor then rounds 176 up to its patch grid, 192);
- for the closed-label tasks a line listing the options in a fixed order is appended.

Rows keep `videos` and carry a `{"type": "video"}` placeholder; [`expand_videos`] (one row) or [`with_frames`] (a
`datasets.Dataset`, lazily) puts the frames in, in the message format of a transformers vision-language processor's
`apply_chat_template` (the metadata goes to the processor as `video_metadata`).

Decoding needs PyAV and Pillow (`pip install av pillow`); building rows does not.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..errors import InputError
from .jsonl import read_jsonl
from .prompts import SOLVER_SYSTEM_PROMPT

#: The closed label sets as HBA writes them, in the order the prompts list them; the task registry
#: (`rlce_trl.data.tasks`, the one table of tasks) gives them to its closed-label video tasks.
MOSEI_LABELS = ("highly negative", "negative", "weakly negative", "neutral", "weakly positive", "positive",
                "highly positive")
URFUNNY_LABELS = ("humour", "not humour")
#: The polarity of each MOSEI label: the classes of the binary metric (neutral is neither).
MOSEI_POLARITY = dict(zip(MOSEI_LABELS, ("negative",) * 3 + ("neutral",) + ("positive",) * 3, strict=True))

FRAME_FPS = 1.0
MIN_FRAMES, MAX_FRAMES = 2, 8
FRAME_SIZE = (176, 320)  # (height, width)


_AUDIO_LINE = re.compile(r"^[ \t]*<audio>[ \t]*\n?", flags=re.MULTILINE)
_VIDEO = "<video>"


def _task(name: str):
    from .tasks import TASKS, video_tasks  # not at the top: the registry reads this module's label sets

    if name not in video_tasks():
        raise InputError(f"Unknown HBA task {name!r}; choose one of {', '.join(video_tasks())}.")
    return TASKS[name]


def options_line(labels: Sequence[str]) -> str:
    """The line appended to closed-label prompts: the task's options in their fixed order."""
    return "Options: " + ", ".join(labels) + "."


def clean_problem(problem: str) -> str:
    """Drop the `<audio>` line (and any stray `<audio>` tag); keep everything else as written."""
    return _AUDIO_LINE.sub("", problem).replace("<audio>", "").strip()


def user_content(problem: str, labels: Sequence[str] = ()) -> list[dict]:
    """Content blocks of the user turn: text and `{"type": "video"}` placeholders in the order the problem gives them,
    then the options line for closed-label tasks."""
    text = clean_problem(problem)
    if labels:
        text = f"{text}\n{options_line(labels)}"
    blocks = []
    for k, part in enumerate(text.split(_VIDEO)):
        if k:
            blocks.append({"type": "video", "text": None})
        if part.strip():
            blocks.append({"type": "text", "text": part.strip()})
    return blocks


def build_hba_row(record: dict, task: str, index: int, split: str = "test") -> dict:
    """One GRPO-ready row from an HBA record. `gold` (the record's `answer`) is kept outside the train split only.

    Every message content is a list of blocks (also the system prompt's), so that Arrow can store the column.
    """
    task = _task(task)
    _check_record(record, task, index, split)
    videos = record.get("videos") or []
    videos = [videos] if isinstance(videos, str) else list(videos)
    row = {"id": str(record.get("id", f"{task.name}/{split}/{index}")), "task": task.name,
           "prompt": [{"role": "system", "content": [{"type": "text", "text": SOLVER_SYSTEM_PROMPT}]},
                      {"role": "user", "content": user_content(record["problem"], task.labels or ())}],
           "answer_options": list(task.labels or ()), "videos": videos,
           "question": clean_problem(record["problem"]).replace(_VIDEO, "").strip()}  # what a text-only judge reads
    n_placeholders = sum(b["type"] == "video" for b in row["prompt"][1]["content"])
    if n_placeholders != len(row["videos"]):
        raise InputError(f"HBA row {row['id']} has {n_placeholders} <video> placeholders in `problem` but "
                         f"{len(row['videos'])} `videos`: put one <video> in the problem text per clip listed in "
                         "`videos`.")
    if split != "train":
        row["gold"] = str(record["answer"]).strip()
    return row


def _check_record(record, task, index: int, split: str) -> None:
    """One line naming the row and the fix when an HBA record lacks what a row is built from (for example a PrefEval
    row passed with `--hba_task`)."""
    if not isinstance(record, dict):
        raise InputError(f"HBA row {index} is a {type(record).__name__}, not an object: each line holds one record.")
    needed = ("problem",) + (("answer",) if split != "train" else ())
    missing = [k for k in needed if k not in record]
    if missing or not isinstance(record.get("problem"), str):
        raise InputError(f"HBA row {index} has no {' / '.join(missing) or 'text `problem`'}: {task.name} rows need "
                         "`problem` (the question with one <video> per clip listed in `videos`)"
                         + (" and `answer`" if split != "train" else "")
                         + "; is this file from another task (a PrefEval split is evaluated without --hba_task)?")


def load_hba_split(path: str | os.PathLike, task: str, split: str) -> list[dict]:
    """Read one HBA split (JSONL) into GRPO-ready rows; `split` decides whether `gold` is kept."""
    return [build_hba_row(record, task, i, split) for i, record in enumerate(read_jsonl(path))]


# ---------------------------------------------------------------------------------------------------------- frames


def num_sampled_frames(total_frames: int, video_fps: float, fps: float = FRAME_FPS, min_frames: int = MIN_FRAMES,
                       max_frames: int = MAX_FRAMES) -> int:
    """How many frames to take from a clip: `fps` frames per second of video, clamped to `min_frames..max_frames`
    (and to the frames the clip has), rounded down to an even count, at least `min_frames` (short clips repeat a
    frame). The rule of qwen-vl-utils' `smart_nframes`, which verl uses."""
    seconds = total_frames / video_fps if video_fps > 0 else 0.0
    upper = max(min_frames, min(max_frames, total_frames))
    n = min(max(seconds * fps, min_frames), upper)
    n = int(n // 2 * 2)
    return max(n, min_frames)


def frame_indices(total_frames: int, num_frames: int) -> list[int]:
    """`num_frames` indices spread evenly over `0..total_frames-1`, first and last included (repeats when the clip is
    shorter than `num_frames`)."""
    if total_frames <= 0:
        raise ValueError("The clip has no frames.")
    if num_frames == 1:
        return [0]
    step = (total_frames - 1) / (num_frames - 1)
    return [min(total_frames - 1, math.floor(k * step + 0.5)) for k in range(num_frames)]


def read_video_frames(path: str | os.PathLike, fps: float = FRAME_FPS, min_frames: int = MIN_FRAMES,
                      max_frames: int = MAX_FRAMES, size: tuple[int, int] | None = FRAME_SIZE,
                      return_metadata: bool = False) -> list | tuple[list, dict]:
    """Decode a clip with PyAV and return the sampled frames as RGB PIL images of `size` (height, width).

    With `return_metadata=True`, also returns the clip's metadata in the form of transformers' `VideoMetadata`
    (`fps`, `total_num_frames`, `duration`, `frames_indices`, `height`, `width`): processors that print frame
    timestamps into the prompt (Qwen3-VL, Qwen3.5) need the source fps and the indices of the frames taken.
    """
    try:
        import av
        from PIL import Image
    except ImportError as error:  # pragma: no cover - exercised only without the extra
        raise ImportError("Reading HBA videos needs PyAV and Pillow: `pip install av pillow`.") from error
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Video {path} not found; check the media root passed for the HBA split.")
    # Decode once: the clips are seconds long, and a stream's frame count in the header is often missing or wrong.
    if path.stat().st_size == 0:
        raise ValueError(f"Video {path} is empty (0 bytes); replace the file or drop its row from the split.")
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise ValueError("no video stream")
            stream = container.streams.video[0]
            # an unknown rate: every decoded frame is one sampling step
            video_fps = float(stream.average_rate or stream.guessed_rate or 0) or float(fps)
            frames = [frame.to_image() for frame in container.decode(stream)]
    except (av.error.FFmpegError, ValueError) as error:
        raise ValueError(f"Video {path} cannot be decoded ({error}); replace the file or drop its row from the "
                         "split.") from error
    if not frames:
        raise ValueError(f"Video {path} has no decodable frames; replace the file or drop its row from the split.")
    n = num_sampled_frames(len(frames), video_fps, fps, min_frames, max_frames)
    indices = frame_indices(len(frames), n)
    picked = [frames[i].convert("RGB") for i in indices]
    if size is not None:
        picked = [image.resize((size[1], size[0]), Image.BICUBIC) for image in picked]  # size is (height, width)
    if not return_metadata:
        return picked
    return picked, {"fps": video_fps, "total_num_frames": len(frames), "duration": len(frames) / video_fps,
                    "frames_indices": indices, "height": picked[0].height, "width": picked[0].width}


def frame_source(path: str | os.PathLike, fps: float = FRAME_FPS, min_frames: int = MIN_FRAMES,
                 max_frames: int = MAX_FRAMES, size: tuple[int, int] | None = FRAME_SIZE) -> dict:
    """A reference to a clip's sampled frames: its absolute path and the sampling settings. Small and JSON-able, so
    processes exchange it instead of pixels; [`load_frames`] turns it back into the same frames."""
    return {"path": str(Path(path).absolute()), "fps": float(fps), "min_frames": int(min_frames),
            "max_frames": int(max_frames), "size": list(size) if size is not None else None}


def load_frames(source: dict) -> tuple[list, dict]:
    """The frames and metadata a [`frame_source`] reference stands for (decoded again: deterministic)."""
    size = source.get("size")
    return read_video_frames(source["path"], source["fps"], source["min_frames"], source["max_frames"],
                             tuple(size) if size else None, return_metadata=True)


def expand_videos(row: dict, media_root: str | os.PathLike, **frame_kwargs) -> dict:
    """A copy of `row` whose video placeholders hold the clip's frames and their metadata
    (`{"type": "video", "video": [images], "metadata": {...}, "source": {...}}`, see [`read_video_frames`] and
    [`frame_source`]), in the order of `row["videos"]`, each resolved against `media_root`. `frame_kwargs` are the
    sampling settings (`fps`, `min_frames`, `max_frames`, `size`); the defaults are the paper's."""
    videos = iter(row.get("videos") or [])

    def fill(block: dict) -> dict:
        if block.get("type") != "video":
            return {k: v for k, v in block.items() if v is not None}
        source = frame_source(Path(media_root) / next(videos), **frame_kwargs)
        frames, metadata = load_frames(source)
        return {"type": "video", "video": frames, "metadata": metadata, "source": source}

    prompt = [{**m, "content": [fill(b) for b in m["content"]] if isinstance(m["content"], list) else m["content"]}
              for m in row["prompt"]]
    return {**row, "prompt": prompt}


def with_frames(dataset, media_root: str | os.PathLike, **frame_kwargs):
    """A view of a `datasets.Dataset` of HBA rows whose prompts get their frames when rows are read (decoding on
    access keeps thousands of clips out of memory)."""

    def transform(batch: dict) -> dict:
        keys = list(batch)
        rows = [dict(zip(keys, values, strict=True)) for values in zip(*(batch[k] for k in keys), strict=True)]
        rows = [expand_videos(r, media_root, **frame_kwargs) for r in rows]
        return {k: [r[k] for r in rows] for k in keys}

    return dataset.with_transform(transform)


def check_clips(rows: Iterable[dict], media_root: str | os.PathLike) -> None:
    """Fail before training when a row's clip is missing or empty (0 bytes): one error naming every such file (up to
    ten) and the fix. Files that exist but cannot be decoded fail when their row is read, naming the file."""
    bad = []
    for row in rows:
        for video in row.get("videos") or []:
            path = Path(media_root) / video
            if not path.is_file():
                bad.append(f"{path} (missing)")
            elif path.stat().st_size == 0:
                bad.append(f"{path} (empty)")
    if bad:
        shown = "\n  ".join(bad[:10]) + (f"\n  ... and {len(bad) - 10} more" if len(bad) > 10 else "")
        raise ValueError(f"{len(bad)} clip(s) of the split cannot be read:\n  {shown}\nCheck --media_root, or drop "
                         "these rows.")
