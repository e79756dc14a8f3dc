"""The rules of the video settings (`video_*` fields of [`RLCEGRPOConfig`]), torch-free. `args` is anything with
`video_*` attributes: the config, a plain `GRPOConfig` under [`~rlce_trl.trainer_video.VideoGRPOMixin`], or the flags
of `rlce-trl sample`; a missing attribute is its default."""

from __future__ import annotations

from .data.hba import FRAME_FPS, FRAME_SIZE, MAX_FRAMES, MIN_FRAMES
from .data.media import VIDEO_INPUTS


def video_problems(args, *, is_vlm: bool | None = None, tools=None, rollout_func=None,
                   environments=None) -> list[str]:
    """Why the video settings of `args` are invalid, each with its fix; empty when they are valid. With `is_vlm` (the
    trainer, on rows that carry video) also why such rows cannot be trained as `args.video_input` asks, given the
    processing class (`is_vlm`), `use_vllm` and the trainer's `tools` / `rollout_func` / `environments`."""
    mode = getattr(args, "video_input", "video")
    fps = getattr(args, "video_fps", FRAME_FPS)
    low, high = getattr(args, "video_min_frames", MIN_FRAMES), getattr(args, "video_max_frames", MAX_FRAMES)
    height = getattr(args, "video_frame_height", FRAME_SIZE[0])
    width = getattr(args, "video_frame_width", FRAME_SIZE[1])
    problems = []
    if mode not in VIDEO_INPUTS:
        problems.append(f"video_input={mode!r}: use one of {', '.join(VIDEO_INPUTS)}.")
    if fps <= 0:
        problems.append(f"video_fps={fps}: set it above 0 (the paper samples 1 frame per second).")
    if not 1 <= low <= high:
        problems.append(
            f"video_min_frames={low}, video_max_frames={high}: need "
            "1 <= video_min_frames <= video_max_frames (the paper: 2 and 8)."
        )
    if height < 1 or width < 1:
        problems.append("video_frame_height and video_frame_width must be >= 1 (the paper: 176 x 320).")
    if is_vlm is None or problems or mode == "text":
        return problems
    if not is_vlm:
        problems.append(
            "the rows carry video frames but the processing class is a text tokenizer: use a vision-language model "
            "(its processor takes video), or set video_input='text' to train on the text alone"
        )
    if mode == "video" and args.use_vllm:
        problems.append(
            "use_vllm=True does not feed video to policy generation (TRL's vLLM path passes images only): set "
            "use_vllm=False (transformers generation), or video_input='images' (frames as an image list, which "
            "vLLM takes)"
        )
    if mode == "video" and (tools or rollout_func is not None or environments):
        problems.append(
            "tools, environments and rollout_func are not supported with video_input='video': drop them, or use "
            "video_input='images'"
        )
    return problems


def frame_kwargs(args) -> dict:
    """The frame sampling of `args` as `rlce_trl.data.hba.with_frames` / `expand_videos` take it (also the config's
    method `frame_kwargs()`)."""
    return {
        "fps": args.video_fps,
        "min_frames": args.video_min_frames,
        "max_frames": args.video_max_frames,
        "size": (args.video_frame_height, args.video_frame_width),
    }
