"""Elect's candidate diversification (Eq. 13 of "Elect to Reason"; next-capabilities §2.1): o_i ~ π^{ξ_i}(·|V, q).

The paper: "Candidates are diversified by a temperature grid {0.2, 0.7, 0.9} with top-p = 0.9 and distinct seeds,
plus center and four-corner crops at 0.9 scale with mild blur (σ = 0.5) and ±10% brightness; one conservative run is
always included." How decoding and perturbations combine is not given; the schedule here is ours:

- candidate 0 is the conservative run: greedy, no perturbation (so a budget of 1 is the greedy baseline);
- candidate k >= 1: temperature grid[(k - 1) mod 3] with top-p 0.9 (no top-k), seed = seed0 + k; on video rows the
  crop [(k - 1) mod 5] (centre, top-left, top-right, bottom-left, bottom-right at 0.9 scale, resized back to the frame
  size), Gaussian blur σ = 0.5 on odd k, brightness +10% when k mod 4 = 2 and -10% when k mod 4 = 0.

Every frame of a candidate's clip gets the same perturbation. Text rows get the decoding grid only.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..data.media import map_video_blocks, video_blocks

TEMPERATURES = (0.2, 0.7, 0.9)
TOP_P = 0.9
CROPS = ("center", "top_left", "top_right", "bottom_left", "bottom_right")
CROP_SCALE = 0.9
BLUR_SIGMA = 0.5
BRIGHTNESS = 0.10


@dataclass(frozen=True)
class Perturbation:
    """A light perturbation ξ of a clip's frames: a crop at `CROP_SCALE` (None: none), a Gaussian blur of standard
    deviation `blur` (0: none), and a brightness change by the factor 1 + `brightness`."""

    crop: str | None = None
    blur: float = 0.0
    brightness: float = 0.0

    @property
    def identity(self) -> bool:
        return self.crop is None and self.blur == 0 and self.brightness == 0


def eq13_schedule(n: int, seed: int = 0, greedy_too: bool = True) -> list[tuple[object, Perturbation]]:
    """(Sampling, Perturbation) of every candidate: the conservative greedy run first (when `greedy_too`), then
    candidates k = 1..n."""
    from ..generation.sampling import Sampling

    out = [(Sampling(temperature=0.0, seed=seed), Perturbation())] if greedy_too else []
    for k in range(1, n + 1):
        brightness = BRIGHTNESS if k % 4 == 2 else -BRIGHTNESS if k % 4 == 0 else 0.0
        out.append((Sampling(temperature=TEMPERATURES[(k - 1) % len(TEMPERATURES)], top_p=TOP_P, seed=seed + k),
                    Perturbation(CROPS[(k - 1) % len(CROPS)], BLUR_SIGMA if k % 2 else 0.0, brightness)))
    return out


def describe() -> dict:
    """The schedule's constants, for the pool's settings (a resume with other settings is refused)."""
    return {"name": "eq13", "temperatures": list(TEMPERATURES), "top_p": TOP_P, "crops": list(CROPS),
            "crop_scale": CROP_SCALE, "blur_sigma": BLUR_SIGMA, "brightness": BRIGHTNESS}


def crop_box(width: int, height: int, crop: str, scale: float = CROP_SCALE) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of a `scale` crop at `crop` (centre or a corner)."""
    if crop not in CROPS:
        raise ValueError(f"crop {crop!r}: use one of {', '.join(CROPS)}.")
    w, h = max(1, round(width * scale)), max(1, round(height * scale))
    left = {"center": (width - w) // 2, "top_left": 0, "bottom_left": 0}.get(crop, width - w)
    top = {"center": (height - h) // 2, "top_left": 0, "top_right": 0}.get(crop, height - h)
    return left, top, left + w, top + h


def perturb_image(image, perturbation: Perturbation):
    """A PIL image with `perturbation` applied (crop resized back to the original size, blur, brightness)."""
    if perturbation.identity:
        return image
    from PIL import Image, ImageEnhance, ImageFilter

    out = image
    if perturbation.crop is not None:
        out = out.crop(crop_box(*out.size, perturbation.crop)).resize(image.size, Image.Resampling.BICUBIC)
    if perturbation.blur:
        out = out.filter(ImageFilter.GaussianBlur(radius=perturbation.blur))  # PIL's radius is the std deviation
    if perturbation.brightness:
        out = ImageEnhance.Brightness(out).enhance(1.0 + perturbation.brightness)
    return out


def perturb_prompt(prompt, perturbation: Perturbation):
    """The prompt with the frames of each video block perturbed (frames must be PIL images: an expanded row)."""
    if perturbation.identity:
        return prompt

    def apply(block: dict) -> dict:
        frames = block.get("video")
        if not isinstance(frames, list):
            return block
        return {**block, "video": [perturb_image(frame, perturbation) for frame in frames]}

    return map_video_blocks(prompt, apply)


def sample_diversified(sampler, prompts: list, schedule: list[tuple[object, Perturbation]]) -> list[list]:
    """`sampler(prompts, specs)` for a schedule: one call for the whole schedule when no prompt has a clip, else one
    call per distinct perturbation with that perturbation applied to every clip; outputs in schedule order."""
    specs = [spec for spec, _ in schedule]
    if not any(video_blocks(p) for p in prompts):
        return sampler(prompts, specs)
    groups: dict[Perturbation, list[int]] = {}
    for i, (_, perturbation) in enumerate(schedule):
        groups.setdefault(perturbation, []).append(i)
    out = [[None] * len(schedule) for _ in prompts]
    for perturbation, indices in groups.items():
        sampled = sampler([perturb_prompt(p, perturbation) for p in prompts], [specs[i] for i in indices])
        for row, outs in enumerate(sampled):
            for i, one in zip(indices, outs, strict=True):
                out[row][i] = one
    return out
