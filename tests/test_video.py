"""Video rows without a vision-language model (main venv, no torchvision): the guards against frame-less training,
the video settings, clip references, and that every verifier stage and the server payload carry the clip.
The training path with a real tiny VLM is tests/vlm/test_video_training.py."""

from __future__ import annotations

import json

import pytest
from datasets import Dataset
from fakes import ScriptedVerifier, evidence_verifier

from rlce_trl import RLCEGRPOConfig, RLCEGRPOTrainer, RLCEReward
from rlce_trl.config_video import video_problems
from rlce_trl.data.hba import check_clips, expand_videos, load_hba_split, read_video_frames, with_frames
from rlce_trl.data.media import resolve, text_only_prompt
from rlce_trl.evidence.pipeline import EvidencePipeline
from rlce_trl.rewards import build_groups
from rlce_trl.trainer_video import OVERRIDDEN, check_trl_version

pytest.importorskip("av")
from testing_utils import make_video

PROBLEM = "<video>\nQuestion {k}: what does the person intend?"


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    root = tmp_path_factory.mktemp("clips")
    for name, seconds in (("a.mp4", 3), ("b.mp4", 5)):
        make_video(root / name, seconds=seconds)
    split = root / "train.jsonl"
    records = [{"problem": PROBLEM.format(k=0), "answer": "x", "videos": [name]} for name in ("a.mp4", "b.mp4")]
    split.write_text("".join(json.dumps(r) + "\n" for r in records))
    return split, root


def test_config_defaults_are_the_papers_and_bad_values_name_the_fix(tmp_path):
    config = RLCEGRPOConfig(str(tmp_path), bf16=False, use_cpu=True)
    assert config.video_input == "video"
    assert config.frame_kwargs() == {"fps": 1.0, "min_frames": 2, "max_frames": 8, "size": (176, 320)}
    with pytest.raises(ValueError) as error:
        RLCEGRPOConfig(str(tmp_path), bf16=False, use_cpu=True, video_input="frames", video_min_frames=9)
    assert "video_input='frames': use one of video, images, text" in str(error.value)
    assert "video_min_frames=9" in str(error.value)


def test_trl_version_guard_names_the_overridden_methods():
    check_trl_version()  # the installed (pinned) TRL
    with pytest.raises(RuntimeError) as error:
        check_trl_version("1.17.0")
    assert all(name in str(error.value) for name in OVERRIDDEN) and "trl>=1.16.0,<1.17" in str(error.value)


def test_unsupported_combinations_name_the_fix(tmp_path):
    vllm = RLCEGRPOConfig(str(tmp_path), bf16=False, use_cpu=True, use_vllm=True)
    (problem,) = video_problems(vllm, is_vlm=True)
    assert "use_vllm=False" in problem and "video_input='images'" in problem
    (problem,) = video_problems(RLCEGRPOConfig(str(tmp_path), bf16=False, use_cpu=True), is_vlm=False)
    assert "vision-language model" in problem and "video_input='text'" in problem
    text = RLCEGRPOConfig(str(tmp_path), bf16=False, use_cpu=True, use_vllm=True, video_input="text")
    assert video_problems(text, is_vlm=False) == []


def test_video_rows_with_vllm_generation_fail_before_any_model_loads(clips, tmp_path):
    split, media = clips
    rows = with_frames(Dataset.from_list(load_hba_split(split, "intentqa", "train")), media)
    config = RLCEGRPOConfig(str(tmp_path), bf16=False, use_cpu=True, use_vllm=True, num_generations=2,
                            per_device_train_batch_size=2)
    with pytest.raises(ValueError, match="use_vllm=False"):
        RLCEGRPOTrainer(model=str(tmp_path / "no-such-model"), args=config, train_dataset=rows,
                        verifier=ScriptedVerifier(lambda r: "yes"))


def test_the_reward_for_stock_trl_refuses_frames_it_would_train_without(clips):
    split, media = clips
    prompt = expand_videos(load_hba_split(split, "intentqa", "train")[0], media)["prompt"]
    reward = RLCEReward(ScriptedVerifier(lambda r: "yes"), num_generations=2)
    with pytest.raises(ValueError, match="RLCEGRPOTrainer"):
        reward([prompt, prompt], ["a", "b"])
    assert reward([text_only_prompt(prompt)] * 2, ["a", "a"]) == [None, None]  # frames dropped on purpose: fine


def test_every_verifier_stage_sees_the_clip_as_a_reference(clips):
    split, media = clips
    rows = [expand_videos(r, media) for r in load_hba_split(split, "intentqa", "train")]
    # the same question text for both clips: the groups still differ (static-test keys include the clip)
    prompts = [r["prompt"] for r in rows for _ in range(2)]
    groups = build_groups(prompts, ["wave", "greet", "wave", "leave"], None, 2)
    assert groups[0].context == groups[1].context and groups[0].prompt_key != groups[1].prompt_key
    assert [g.media[0]["source"]["path"].rsplit("/", 1)[1] for g in groups] == ["a.mp4", "b.mp4"]
    assert all("video" not in item for g in groups for item in g.media)  # references, not pixels

    verifier = evidence_verifier({"wave>greet": "yes"})
    EvidencePipeline(verifier).score(groups)
    requests = [r for batch in verifier.batches for r in batch]
    assert {r.stage for r in requests} == {"equivalence", "construction", "validation"}
    for stage in ("equivalence", "construction", "validation"):  # each stage showed each group its own clip
        shown = [r.media for r in requests if r.stage == stage]
        assert groups[0].media in shown and groups[1].media in shown and all(m in (g.media for g in groups)
                                                                                 for m in shown)
    for request in (r for r in requests if r.stage == "construction"):
        text = json.dumps(request.messages)
        assert request.media == (groups[0].media if "greet" in text else groups[1].media)
    frames, metadata = resolve(groups[1].media[0])  # decodes to the frames the policy saw
    direct, direct_meta = read_video_frames(media / "b.mp4", return_metadata=True)
    assert metadata == direct_meta and [f.tobytes() for f in frames] == [f.tobytes() for f in direct]


def test_bad_clips_are_named_with_the_fix(clips, tmp_path):
    _, media = clips
    (tmp_path / "empty.mp4").write_bytes(b"")
    (tmp_path / "garbage.mp4").write_bytes(b"not a video at all" * 100)
    with pytest.raises(ValueError, match=r"empty\.mp4 is empty \(0 bytes\)"):
        read_video_frames(tmp_path / "empty.mp4")
    with pytest.raises(ValueError, match=r"garbage\.mp4 cannot be decoded .*drop its row"):
        read_video_frames(tmp_path / "garbage.mp4")
    rows = [{"videos": ["a.mp4"]}, {"videos": ["gone.mp4"]}, {"videos": ["empty.mp4"]}]
    (media / "empty.mp4").write_bytes(b"")
    with pytest.raises(ValueError) as error:
        check_clips(rows, media)
    assert "2 clip(s)" in str(error.value) and "gone.mp4 (missing)" in str(error.value)
    assert "empty.mp4 (empty)" in str(error.value) and "--media_root" in str(error.value)
    (media / "empty.mp4").unlink()
    check_clips(rows[:1], media)


def test_clips_of_different_sizes_become_frames_of_one_size(tmp_path):
    """Mixed source sizes in one batch are not an error: every clip is resized to the configured frame size."""
    make_video(tmp_path / "small.mp4", seconds=2, width=64, height=48)
    make_video(tmp_path / "wide.mp4", seconds=2, width=96, height=32)
    sizes = {f.size for name in ("small.mp4", "wide.mp4") for f in read_video_frames(tmp_path / name)}
    assert sizes == {(320, 176)}
    assert {f.size for f in read_video_frames(tmp_path / "wide.mp4", size=(64, 128))} == {(128, 64)}
