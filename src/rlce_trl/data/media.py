"""Video blocks in prompts and verifier requests, without torch.

A video block of a prompt, as `rlce_trl.data.hba.expand_videos` writes it:
`{"type": "video", "video": [PIL frames], "metadata": {...}, "source": {...}}`. `source` ([`frame_source`]) is a
reference (absolute path and sampling settings) that [`resolve`] turns back into the same frames, so that processes
exchange references rather than pixels. A *media item* (`Request.media`, `Group.media`) is a video block of that form
with or without the `video` frames; a block without a `source` keeps its frames (its pixels then travel).
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Sequence
from functools import lru_cache

from .hba import load_frames

#: How video enters the policy: `video` (a video input of the processor), `images` (the frames as a multi-image
#: list), `text` (frames dropped).
VIDEO_INPUTS = ("video", "images", "text")


def video_blocks(prompt) -> list[dict]:
    """The video blocks of a conversational prompt, in order (none for a string prompt)."""
    if isinstance(prompt, str):
        return []
    return [block for message in prompt if isinstance(message.get("content"), list) for block in message["content"]
            if isinstance(block, dict) and block.get("type") == "video"]


def has_video(prompt) -> bool:
    """Whether the prompt has a video block that carries frames or a frame reference."""
    return any(b.get("video") is not None or b.get("source") for b in video_blocks(prompt))


def has_raw_frames(prompt) -> bool:
    """Whether the prompt carries frames that no video-aware trainer took over (stock TRL passes them through to the
    reward functions unchanged; `VideoGRPOMixin` replaces them with a reference index, `frames_ref`)."""
    return any(b.get("video") is not None and "frames_ref" not in b for b in video_blocks(prompt))


def media_items(prompt) -> list[dict] | None:
    """What the verifier needs to see the prompt's clips: per video block its `source` reference and metadata, or
    its frames when it has no reference. `None` when the prompt has no video."""
    items = []
    for block in video_blocks(prompt):
        key = "source" if block.get("source") else "video" if block.get("video") is not None else None
        if key:
            items.append({"type": "video", "metadata": block.get("metadata"), key: block[key]})
    return items or None


def media_key(media: Sequence[dict] | None) -> str:
    """A stable identity of media items (sources and frame indices), for cache keys; `""` without media."""
    if not media:
        return ""
    return json.dumps([(m.get("source"), (m.get("metadata") or {}).get("frames_indices")) for m in media],
                      sort_keys=True)


def resolve(item: dict) -> tuple[list, dict]:
    """The frames and metadata of a media item: its own frames, or those its `source` decodes to (a small LRU cache
    keeps the clips of the last few steps)."""
    if item.get("video") is not None:
        return item["video"], item.get("metadata") or {}
    source = item.get("source")
    if not source:
        raise ValueError("A video media item needs `video` frames or a `source` reference (see frame_source).")
    return _decoded(json.dumps(source, sort_keys=True))


@lru_cache(maxsize=64)
def _decoded(source: str) -> tuple[list, dict]:
    return load_frames(json.loads(source))


def map_video_blocks(prompt, fn):
    """The prompt with each video block `b` replaced by `fn(b)`: a block, a list of blocks, or `None` (dropped); a
    plain-string prompt is returned as it is."""
    if isinstance(prompt, str):
        return prompt
    out = []
    for message in prompt:
        content = message.get("content")
        if isinstance(content, list):
            mapped = [fn(b) if isinstance(b, dict) and b.get("type") == "video" else [b] for b in content]
            content = [b for m in mapped for b in ([m] if isinstance(m, dict) else m or [])]
        out.append({**message, "content": content})
    return out


def text_only_prompt(prompt):
    """The prompt with its video blocks removed (the `text` video input, and frame-stripped controls)."""
    return map_video_blocks(prompt, lambda block: None)


def _first_user_starts_with(messages: list[dict], parts: list[dict]) -> list[dict]:
    """The messages with `parts` put before the content of the first user turn (else the last turn)."""
    k = next((k for k, m in enumerate(messages) if m.get("role") == "user"), len(messages) - 1)
    content = messages[k]["content"]
    text = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    return [*messages[:k], {**messages[k], "content": [*parts, *text]}, *messages[k + 1 :]]


def with_media(messages: list[dict], media: Sequence[dict] | None) -> list[dict]:
    """A verifier conversation with its clips: the frames go first in the first user turn (before the text, so that
    all requests of a group share the clip as a prefix), as processor-ready video blocks."""
    if not media:
        return messages
    videos = [{"type": "video", "video": frames, "metadata": metadata} for frames, metadata in map(resolve, media)]
    return _first_user_starts_with(messages, videos)


def _jpeg_url(image, quality: int = 90) -> str:
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="JPEG", quality=quality)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()


def openai_messages(messages: list[dict], media: Sequence[dict] | None) -> list[dict]:
    """The request's chat messages as an OpenAI-compatible server takes them: without media unchanged; with media
    the first user turn becomes content parts, one text part naming the clip's frame times, one `image_url` part per
    frame (a JPEG data URL), then the text."""
    if not media:
        return messages
    parts: list[dict] = []
    for item in media:
        frames, metadata = resolve(item)
        fps, indices = metadata.get("fps"), metadata.get("frames_indices")
        times = [round(i / fps, 1) for i in indices] if fps and indices and len(indices) == len(frames) else []
        label = f"Video ({len(frames)} frames" + (f" at {', '.join(f'{t:g}' for t in times)} s" if times else "")
        parts.append({"type": "text", "text": label + "):"})
        parts += [{"type": "image_url", "image_url": {"url": _jpeg_url(frame)}} for frame in frames]
    return _first_user_starts_with(messages, parts)


def first_prompt(dataset):
    """The prompt of a dataset's first row (decoding its clip if the dataset decodes on access), or `None` (also for
    no dataset, or a dict of them)."""
    try:
        return dataset[0].get("prompt")
    except (TypeError, IndexError, KeyError, AttributeError):  # iterable or empty datasets: checked per batch instead
        return None
