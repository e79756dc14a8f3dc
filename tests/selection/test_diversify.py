"""Elect's Eq. 13 candidate diversification in `rlce-trl sample`: the temperature grid {0.2, 0.7, 0.9} with top-p 0.9
and distinct seeds, the conservative greedy run first, and on video rows the crops (centre, four corners at 0.9
scale), blur σ = 0.5 and ±10% brightness, applied to the frames the sampler sees; on by default for the Elect style,
off by `--diversify off`; the pool records each candidate's settings. Samplers here are FAKES that record what they
were given (real samplers are tested with real models in test_select_commands.py and tests/vlm/)."""

import argparse
import json
from dataclasses import asdict

import pytest
from PIL import Image, ImageStat

from rlce_trl.cli import sample
from rlce_trl.generation.generators import Sampled
from rlce_trl.selection.diversify import (
    BLUR_SIGMA,
    Perturbation,
    crop_box,
    eq13_schedule,
    perturb_image,
    perturb_prompt,
)
from rlce_trl.selection.pool import sample_pool


def test_schedule_follows_eq13():
    schedule = eq13_schedule(8, seed=10)
    (greedy, xi0), *rest = schedule
    assert greedy.temperature == 0.0 and xi0.identity and greedy.seed == 10
    assert [s.temperature for s, _ in rest] == [0.2, 0.7, 0.9, 0.2, 0.7, 0.9, 0.2, 0.7]
    assert {s.top_p for s, _ in rest} == {0.9} and {s.top_k for s, _ in rest} == {0}
    assert [s.seed for s, _ in rest] == list(range(11, 19))
    assert [x.crop for _, x in rest] == ["center", "top_left", "top_right", "bottom_left", "bottom_right", "center",
                                         "top_left", "top_right"]
    assert [x.blur for _, x in rest] == [BLUR_SIGMA, 0.0] * 4
    assert [x.brightness for _, x in rest] == [0.0, 0.1, 0.0, -0.1] * 2
    assert len(eq13_schedule(3, greedy_too=False)) == 3 and eq13_schedule(3, greedy_too=False)[0][0].temperature == 0.2


def _gradient(width=100, height=50):
    image = Image.new("RGB", (width, height))
    image.putdata([(x * 2, y * 4, 128) for y in range(height) for x in range(width)])
    return image


def test_crops_blur_and_brightness_on_frames():
    assert crop_box(100, 50, "center") == (5, 2, 95, 47)
    assert crop_box(100, 50, "top_left") == (0, 0, 90, 45) and crop_box(100, 50, "bottom_right") == (10, 5, 100, 50)
    assert crop_box(100, 50, "top_right") == (10, 0, 100, 45) and crop_box(100, 50, "bottom_left") == (0, 5, 90, 50)
    with pytest.raises(ValueError, match="use one of"):
        crop_box(10, 10, "middle")
    image = _gradient()
    assert perturb_image(image, Perturbation()) is image
    right = perturb_image(image, Perturbation(crop="bottom_right"))
    assert right.size == image.size and right.getpixel((0, 0))[0] == pytest.approx(20, abs=3)  # x = 10 -> 20
    assert perturb_image(image, Perturbation(crop="top_left")).getpixel((0, 0))[:2] == pytest.approx((0, 0), abs=3)
    brighter = ImageStat.Stat(perturb_image(image, Perturbation(brightness=0.1))).mean
    darker = ImageStat.Stat(perturb_image(image, Perturbation(brightness=-0.1))).mean
    base = ImageStat.Stat(image).mean
    assert brighter[2] == pytest.approx(base[2] * 1.1, abs=1) and darker[2] == pytest.approx(base[2] * 0.9, abs=1)
    checker = Image.new("L", (16, 16))
    checker.putdata([255 * ((x + y) % 2) for y in range(16) for x in range(16)])
    blurred = perturb_image(checker, Perturbation(blur=BLUR_SIGMA))
    assert ImageStat.Stat(blurred).stddev[0] < 0.9 * ImageStat.Stat(checker).stddev[0]


def _parser():
    parser = argparse.ArgumentParser()
    sample.add_arguments(parser)
    return parser


class RecordingSampler:
    """A FAKE sampler: records every call's prompts and specs, answers with the spec's temperature."""

    def __init__(self):
        self.calls = []

    def __call__(self, prompts, specs):
        self.calls.append((prompts, specs))
        return [[Sampled(f"<answer>{s.temperature}</answer>", [-0.1]) for s in specs] for _ in prompts]


@pytest.mark.parametrize(("extra", "diversified"), [([], True), (["--diversify", "off"], False),
                                                    (["--style", "boxed"], False),
                                                    (["--style", "boxed", "--diversify", "on"], True)])
def test_sample_uses_the_grid_by_default_for_elect(tmp_path, extra, diversified):
    out = tmp_path / "pool"
    argv = ["--model_name_or_path", "unused", "--synthetic", "2", "--output_dir", str(out), "--n", "4", *extra]
    sampler = RecordingSampler()
    assert sample.main(_parser().parse_args(argv), sampler=sampler) == 0
    rows = [json.loads(line) for line in (out / "pool.jsonl").read_text().splitlines()]
    settings = json.loads((out / "sample_settings.json").read_text())
    for row in rows:
        temps = [c["temperature"] for c in row["candidates"]]
        assert row["greedy"]["temperature"] == 0.0
        if diversified:
            assert temps == [0.2, 0.7, 0.9, 0.2] and {c["top_p"] for c in row["candidates"]} == {0.9}
            assert all(c["perturbation"] is None for c in [row["greedy"], *row["candidates"]])  # text rows
            assert row["decoding"]["diversify"]["temperatures"] == [0.2, 0.7, 0.9]
        else:
            assert temps == [1.0] * 4 and "perturbation" not in row["candidates"][0]
        assert len({c["seed"] for c in row["candidates"]}) == 4
    assert ("diversify" in settings) == diversified
    # text rows: one call per row (progress is shown row by row), each for the row's whole schedule
    assert len(sampler.calls) == len(rows) and all(len(prompts) == 1 for prompts, _ in sampler.calls)


def test_video_rows_see_each_candidates_perturbation(tmp_path):
    frames = [_gradient(), _gradient().transpose(Image.Transpose.FLIP_LEFT_RIGHT)]
    block = {"type": "video", "video": frames, "metadata": {"fps": 1.0}, "source": {"path": "clip.mp4"}}
    rows = [{"id": "r0", "prompt": [{"role": "user", "content": [block, {"type": "text", "text": "mood?"}]}],
             "answer_options": ["a", "b"], "num_frames": 2, "videos": ["clip.mp4"]}]
    schedule = eq13_schedule(5, seed=3)
    sampler = RecordingSampler()
    sample_pool(rows, sampler, tmp_path, n=5, seed=3, schedule=schedule, log=lambda _: None)
    seen = {}  # spec seed -> the frames the sampler got for it
    for prompts, specs in sampler.calls:
        (prompt,) = prompts
        (video,) = [b for b in prompt[0]["content"] if b["type"] == "video"]
        for spec in specs:
            seen[spec.seed] = video["video"]
    assert len(sampler.calls) == len({xi for _, xi in schedule})  # one call per distinct perturbation
    for spec, xi in schedule:
        expected = perturb_prompt(rows[0]["prompt"], xi)[0]["content"][0]["video"]
        assert [f.tobytes() for f in seen[spec.seed]] == [f.tobytes() for f in expected], spec
        assert (seen[spec.seed] is frames) == xi.identity
    (row,) = [json.loads(line) for line in (tmp_path / "pool.jsonl").read_text().splitlines()]
    assert row["greedy"]["perturbation"] is None and row["greedy"]["temperature"] == 0.0
    recorded = [c["perturbation"] for c in row["candidates"]]
    assert recorded == [asdict(xi) for _, xi in schedule[1:]]
    assert recorded[0] == {"crop": "center", "blur": BLUR_SIGMA, "brightness": 0.0}
    (stored,) = [b for b in row["prompt"][0]["content"] if b["type"] == "video"]
    assert "video" not in stored  # the pool keeps the clip reference, never pixels
