"""Video rows through RLCE training: the policy's loss and the frozen verifier see the clip.

- `media`: video blocks, frame references, verifier request media, OpenAI content parts (no torch);
- `config.VideoArguments`: the `video_*` fields of `RLCEGRPOConfig`;
- `trainer.VideoGRPOMixin`: the TRL 1.16 overrides that feed frames to generation and every log-prob forward.
"""

from .config import VideoArguments
from .media import VIDEO_INPUTS, has_video, media_items, text_only_prompt

__all__ = ["VIDEO_INPUTS", "VideoArguments", "has_video", "media_items", "text_only_prompt"]
