"""Video through TRL 1.16's GRPO: the frames reach generation AND every log-probability forward.

Stock `GRPOTrainer` (1.16) tokenizes video blocks for generation only, with the processor's defaults (an 8-frame clip
is re-sampled to 4 frames at an assumed 24 fps), and builds the vision inputs of the old, reference and current
log-probabilities and of the loss from `image` / `images` columns only: on video rows it trains on prompts full of
`<|video_pad|>` tokens with no pixels, silently. [`VideoGRPOMixin`] overrides four private methods of TRL 1.16
([`OVERRIDDEN`]; each override's docstring says why) and calls TRL's own code for rows without video.

`video_input="images"` gives the frames to TRL's own multi-image path instead, `"text"` drops them. Unsupported
combinations (vLLM generation of video, tools, a text-only processor) raise an error that names the fix.
"""

from __future__ import annotations

import functools
import logging

import torch

from .config_video import video_problems
from .data.media import first_prompt, has_video, map_video_blocks, resolve, text_only_prompt, video_blocks

logger = logging.getLogger(__name__)

#: The TRL releases whose private GRPOTrainer methods the mixin overrides, and those methods.
TRL_RANGE = ("1.16.0", "1.17")
OVERRIDDEN = ("_tokenize_prompts", "_generate_and_score_completions", "_get_per_token_logps_and_entropies",
              "_compute_loss")


def check_trl_version(version: str | None = None) -> None:
    """Raise when the installed TRL is not one whose private methods [`VideoGRPOMixin`] was written against."""
    import trl
    from packaging.version import Version

    version = version or trl.__version__
    low, high = TRL_RANGE
    if not Version(low) <= Version(version) < Version(high):
        raise RuntimeError(
            f"Video training overrides TRL's private GRPOTrainer methods {', '.join(OVERRIDDEN)}, written against "
            f"trl>={low},<{high}, but trl {version} is installed. Install `trl>={low},<{high}`, or train without "
            "frames (video_input='text')."
        )


def _as_images(row: dict) -> dict:
    """`video_input="images"`: each video block becomes one `{"type": "image"}` placeholder per frame, and the row's
    `images` column the frames, which TRL's own multi-image path fills in and forwards everywhere."""
    images = []

    def placeholders(block: dict) -> list[dict]:
        frames, _ = resolve(block)
        images.extend(frames)
        return [{"type": "image"} for _ in frames]

    prompt = map_video_blocks(row["prompt"], placeholders)
    return {**row, "prompt": prompt, "images": images}


class VideoGRPOMixin:
    """Mix into a `trl.GRPOTrainer` subclass (before it in the bases) to train on video rows (module docstring).
    The subclass calls `self._video_setup()` at the end of its `__init__`."""

    _video_ctx: tuple[list, list] | None = None  # per-row (pixels, grids) of the rows being scored
    _video_frames: list | None = None  # frames of the local generation batch, by reference index
    _video_checked = False

    # -- set-up and checks --------------------------------------------------------------------------------------------
    @staticmethod
    def check_video_dataset(dataset, args) -> None:
        """Before any model loads: when the dataset's rows carry video and `args` cannot train them, raise."""
        prompt = first_prompt(dataset)
        if prompt is None or not has_video(prompt):
            return
        problems = video_problems(args, is_vlm=True)
        if problems:
            raise ValueError("The training rows carry video, but " + "; ".join(problems) + ".")

    def _video_setup(self) -> None:
        self.video_input = getattr(self.args, "video_input", "video")
        # A sampled video pad token has no pixels: suppress it, as TRL suppresses the image token.
        pad = getattr(self, "_video_pad_token_id", None)
        if pad is not None and getattr(self, "generation_config", None) is not None:
            suppressed = sorted({*(self.generation_config.suppress_tokens or []), pad})
            self.generation_config.suppress_tokens = suppressed
            self.generation_kwargs["suppress_tokens"] = suppressed

    def _check_video_support(self) -> None:
        if self._video_checked:
            return
        problems = video_problems(
            self.args, is_vlm=self._is_vlm, tools=self.tools, rollout_func=self.rollout_func,
            environments=getattr(self, "environment_factories", None),
        )
        if problems:
            raise ValueError("This batch carries video, but " + "; ".join(problems) + ".")
        if self.video_input == "video":
            check_trl_version()
            if (self.chat_template_kwargs or {}).get("enable_thinking"):
                raise ValueError(
                    "video_input='video' renders prompts exactly as `rlce-trl evaluate` does, with thinking "
                    "disabled: drop enable_thinking=True from chat_template_kwargs."
                )
        self._video_checked = True

    def _generate_and_score_completions(self, inputs):
        """Override: TRL keeps no per-row video inputs, so the frames leave the rows here (prompts keep a reference:
        rewards, logs and gathers never carry pixels) and the per-row lists `pixel_values_videos` / `video_grid_thw`
        join TRL's output, which TRL shuffles and slices with the rows (`steps_per_generation > 1` keeps each clip)."""
        if not any(has_video(x.get("prompt", "")) for x in inputs):
            return super()._generate_and_score_completions(inputs)
        if self.video_input == "text":
            return super()._generate_and_score_completions(
                [{**x, "prompt": text_only_prompt(x["prompt"])} for x in inputs]
            )
        self._check_video_support()
        if self.video_input == "images":
            return super()._generate_and_score_completions([_as_images(x) for x in inputs])
        frames: list = []
        rows = [{**x, "prompt": self._detach_frames(x["prompt"], frames)} for x in inputs]
        self._video_frames = frames
        try:
            output = super()._generate_and_score_completions(rows)
            output["pixel_values_videos"], output["video_grid_thw"] = self._video_ctx  # set by _tokenize_prompts
        finally:
            self._video_ctx, self._video_frames = None, None
        return output

    @staticmethod
    def _detach_frames(prompt, store: list):
        """The prompt with each clip's frames moved to `store` (the block keeps an index, its metadata and its
        source reference; a block without a reference keeps its frames, which then travel with the prompt)."""
        def detach(block: dict) -> dict:
            video, metadata = resolve(block)
            kept = {"type": "video", "metadata": metadata, "frames_ref": len(store)}
            if block.get("source"):
                kept["source"] = block["source"]
            else:
                kept["video"] = video
            store.append(video)
            return kept

        return map_video_blocks(prompt, detach)

    def _tokenize_prompts(self, prompts: list):
        """Override: TRL tokenizes video with the processor's defaults (module docstring); video rows are rendered
        as `rlce-trl evaluate` renders them (`VisionLanguageGenerator.encode`: the clip's own frames, fps and frame
        indices, thinking disabled), to the same token ids."""
        if self._video_frames is None or not any(video_blocks(p) for p in prompts):
            return super()._tokenize_prompts(prompts)
        from .generation.generators import VisionLanguageGenerator

        conversations, counts = [], []
        for prompt in prompts:
            blocks = video_blocks(prompt)
            for block in blocks:
                block["video"] = self._video_frames[block["frames_ref"]]
            # as the processor reads them: video blocks with frames and metadata only
            conversations.append(map_video_blocks(
                prompt, lambda b: {"type": "video", "video": b["video"], "metadata": b.get("metadata")}))
            counts.append(len(blocks))
        batch = VisionLanguageGenerator(None, self.processing_class).encode(conversations)
        mask = batch["attention_mask"].bool()
        prompt_ids = [ids[m].tolist() for ids, m in zip(batch["input_ids"], mask, strict=True)]
        grids = batch["video_grid_thw"]
        grid_list = list(torch.split(grids, counts))
        pixel_list = list(torch.split(batch["pixel_values_videos"], [int(g.prod(-1).sum()) for g in grid_list]))
        self._video_ctx = (pixel_list, grid_list)
        fields = {"pixel_values_videos": batch["pixel_values_videos"], "video_grid_thw": grids}
        if "mm_token_type_ids" in batch:
            types = batch["mm_token_type_ids"]
            fields["mm_token_type_ids"] = [t[m].tolist() for t, m in zip(types, mask, strict=True)]
        return prompt_ids, None, fields

    def _video_token_types(self, input_ids: torch.Tensor, logits_to_keep: int) -> torch.Tensor:
        """`mm_token_type_ids` of prompt+completion ids: 2 on the prompt's video pad tokens (a video batch has no
        image inputs), 0 elsewhere."""
        types = torch.zeros_like(input_ids)
        prompt = input_ids[:, : input_ids.size(1) - logits_to_keep]
        types[:, : prompt.size(1)][prompt == self._video_pad_token_id] = 2
        return types

    def _get_per_token_logps_and_entropies(
        self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, compute_entropy=False,
        compute_aux_loss=False, **vision,
    ):
        """Override: TRL forwards image inputs only; each chunk of video rows gets its clips, grids and
        `mm_token_type_ids` (rebuilt from the prompt ids: Qwen's M-RoPE needs them) in TRL's own forward."""
        if self._video_ctx is None:
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss,
                **vision,
            )
        given = sorted(k for k, v in vision.items() if v is not None)
        if given:
            raise ValueError(f"Video rows cannot be mixed with image inputs ({', '.join(given)}) in one batch.")
        pixels, grids = self._video_ctx
        if len(grids) != input_ids.size(0):
            raise RuntimeError(f"{len(grids)} clips for {input_ids.size(0)} rows: the video inputs lost alignment.")
        types = self._video_token_types(input_ids, logits_to_keep)
        batch_size = batch_size or input_ids.size(0)
        chunks = []
        for start in range(0, input_ids.size(0), batch_size):
            end = min(start + batch_size, input_ids.size(0))
            forward = model
            if any(g.numel() for g in grids[start:end]):
                forward = functools.partial(
                    model,
                    pixel_values_videos=torch.cat(pixels[start:end]).to(input_ids.device),
                    video_grid_thw=torch.cat(grids[start:end]).to(input_ids.device),
                )
            chunks.append(super()._get_per_token_logps_and_entropies(
                forward, input_ids[start:end], attention_mask[start:end], logits_to_keep, end - start,
                compute_entropy, compute_aux_loss, mm_token_type_ids=types[start:end],
            ))
        logps, entropies, aux = zip(*chunks, strict=True)
        return (
            torch.cat(logps),
            torch.cat(entropies) if compute_entropy else None,
            torch.stack(aux).mean() if compute_aux_loss else None,
        )

    def _compute_loss(self, model, inputs):
        """Override: TRL's loss forward takes image inputs only; it is pointed at the micro-batch's clips."""
        if "video_grid_thw" not in inputs:
            return super()._compute_loss(model, inputs)
        self._video_ctx = (inputs["pixel_values_videos"], inputs["video_grid_thw"])
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._video_ctx = None
