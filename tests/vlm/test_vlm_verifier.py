"""`VisionLanguageVerifier` with a REAL tiny Qwen3.5 VLM and its processor: requests that carry a clip run the vision
tower with the frames the policy sees; guided choice and sampling work; text requests still work. Run with -m vlm."""

from __future__ import annotations

import pytest
import torch
from testing_utils import build_tiny_vlm, make_video

from rlce_trl.data.hba import frame_source
from rlce_trl.evidence.prompts import validation_messages
from rlce_trl.verifiers.base import Request, Sampling
from rlce_trl.verifiers.vlm_backend import VisionLanguageVerifier, load_frozen_vlm

pytestmark = pytest.mark.vlm
pytest.importorskip("torchvision")
pytest.importorskip("av")


@pytest.fixture(scope="module")
def verifier(tmp_path_factory):
    root = tmp_path_factory.mktemp("vlm-verifier")
    model, processor = load_frozen_vlm(str(build_tiny_vlm(root / "m")), dtype=torch.float32)
    return VisionLanguageVerifier(model, processor, batch_size=2), root


def test_requests_with_a_clip_run_the_vision_tower_on_its_frames(verifier):
    verifier, root = verifier
    make_video(root / "c.mp4", seconds=6)
    media = [{"type": "video", "source": frame_source(root / "c.mp4"), "metadata": None}]
    grids = []
    hook = verifier.model.model.visual.register_forward_hook(
        lambda module, args, kwargs, out: grids.append(kwargs["grid_thw"].clone()), with_kwargs=True)
    try:
        replies = verifier.generate([
            Request(validation_messages("User: what does the person intend?", "The person waves."),
                    Sampling(max_tokens=8), choices=("yes", "no", "unknown"), stage="validation", media=media),
            Request(validation_messages("User: what does the person intend?", "The person leaves."),
                    Sampling(max_tokens=8), choices=("yes", "no", "unknown"), stage="validation", media=media),
            Request(validation_messages("User: text only", "Claim."), Sampling(max_tokens=2), stage="validation"),
            Request(validation_messages("User: sampled", "Claim."), Sampling(temperature=1.0, max_tokens=3, n=2),
                    stage="construction", media=media),
        ])
    finally:
        hook.remove()
    assert [r.texts[0] in ("yes", "no", "unknown") for r in replies[:2]] == [True, True]  # guided choice held
    assert len(replies[3].texts) == 2 and all(r.error is None for r in replies)
    # 6 frames at 1 fps -> 3 temporal patches of 12x20; the text-only request added no clip
    assert grids and all(g[:, 0].tolist() == [3] * len(g) for g in grids)
    assert len(grids) == 2 and len(grids[0]) == 2  # one forward for both validation requests, one for the sampled one
    assert verifier.stats.calls == 1 and verifier.stats.requests == 4
