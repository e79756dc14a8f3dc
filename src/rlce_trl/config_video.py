"""The video settings of [`RLCEGRPOConfig`] (a dataclass mixin, torch-free)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .data.hba import FRAME_FPS, FRAME_SIZE, MAX_FRAMES, MIN_FRAMES
from .data.media import VIDEO_INPUTS


@dataclass
class VideoArguments:
    r"""
    > Parameters that control video rows (Human Behavior Atlas tasks)

    Parameters:
        video_input (`str`, *optional*, defaults to `"video"`):
            How a row's clip enters the policy. `"video"`: a video input of the processor, in generation and in every
            log-probability forward (old, reference, current), rendered exactly as `rlce-trl evaluate` renders it.
            `"images"`: the frames as a list of images (TRL's own multi-image path, which vLLM generation also
            takes; no timestamps, about twice the visual tokens, evaluation still uses video blocks, and the verifier
            does not see the frames).
            `"text"`: the frames are dropped (text-only policy, frame-stripped control).
        video_fps (`float`, *optional*, defaults to `1.0`):
            Frames sampled per second of clip (paper, appendix A).
        video_min_frames (`int`, *optional*, defaults to `2`):
            Fewest frames per clip.
        video_max_frames (`int`, *optional*, defaults to `8`):
            Most frames per clip.
        video_frame_height (`int`, *optional*, defaults to `176`):
            Frame height after resizing (the processor rounds it up to its patch grid).
        video_frame_width (`int`, *optional*, defaults to `320`):
            Frame width after resizing.
    """

    video_input: str = field(
        default="video",
        metadata={"help": "How clips enter the policy: video, images or text.", "choices": list(VIDEO_INPUTS)},
    )
    video_fps: float = field(default=FRAME_FPS, metadata={"help": "Frames sampled per second of clip."})
    video_min_frames: int = field(default=MIN_FRAMES, metadata={"help": "Fewest frames per clip."})
    video_max_frames: int = field(default=MAX_FRAMES, metadata={"help": "Most frames per clip."})
    video_frame_height: int = field(default=FRAME_SIZE[0], metadata={"help": "Frame height after resizing."})
    video_frame_width: int = field(default=FRAME_SIZE[1], metadata={"help": "Frame width after resizing."})

    def video_problems(self) -> list[str]:
        """Invalid video settings, each with its fix (collected by `RLCEGRPOConfig.__post_init__`)."""
        problems = []
        if self.video_input not in VIDEO_INPUTS:
            problems.append(f"video_input={self.video_input!r}: use one of {', '.join(VIDEO_INPUTS)}.")
        if self.video_fps <= 0:
            problems.append(f"video_fps={self.video_fps}: set it above 0 (the paper samples 1 frame per second).")
        if not 1 <= self.video_min_frames <= self.video_max_frames:
            problems.append(
                f"video_min_frames={self.video_min_frames}, video_max_frames={self.video_max_frames}: need "
                "1 <= video_min_frames <= video_max_frames (the paper: 2 and 8)."
            )
        if self.video_frame_height < 1 or self.video_frame_width < 1:
            problems.append("video_frame_height and video_frame_width must be >= 1 (the paper: 176 x 320).")
        return problems

    def frame_kwargs(self) -> dict:
        """The sampling settings as `rlce_trl.data.hba.with_frames` / `expand_videos` take them."""
        return {
            "fps": self.video_fps,
            "min_frames": self.video_min_frames,
            "max_frames": self.video_max_frames,
            "size": (self.video_frame_height, self.video_frame_width),
        }
