"""The baselines show the clip where appendix D gives the model the input (issue 26): Policy LLM-Judge (D.2) and the
rubric seed and per-visit generators (D.3) send the group's frames to a REAL tiny VLM verifier, whose vision tower
runs on them; the rubric judge stays text-only. Run with -m vlm."""

from __future__ import annotations

import pytest
import torch
from testing_utils import build_tiny_vlm, make_video

from rlce_trl.data.hba import MOSEI_LABELS, frame_source
from rlce_trl.methods import PolicyJudgeScorer
from rlce_trl.methods.rubrics import RubricScorer
from rlce_trl.scoring import Group
from rlce_trl.verifiers.base import Verifier
from rlce_trl.verifiers.vlm_backend import VisionLanguageVerifier, load_frozen_vlm

pytestmark = pytest.mark.vlm
pytest.importorskip("torchvision")
pytest.importorskip("av")


class Recording(Verifier):
    """The real VLM verifier, with every request it was sent kept."""

    name = "recording"

    def __init__(self, inner: Verifier):
        super().__init__()
        self.inner, self.requests = inner, []
        self.supports_structured_output = inner.supports_structured_output

    def _generate(self, requests):
        self.requests.extend(requests)
        return self.inner.generate(requests)


@pytest.fixture(scope="module")
def vlm(tmp_path_factory):
    root = tmp_path_factory.mktemp("baseline-media")
    model, processor = load_frozen_vlm(str(build_tiny_vlm(root / "m")), dtype=torch.float32)
    make_video(root / "c.mp4", seconds=4)
    media = [{"type": "video", "source": frame_source(root / "c.mp4"), "metadata": None}]
    return VisionLanguageVerifier(model, processor, batch_size=4), media


def run(verifier, scorer, groups):
    grids = []
    hook = verifier.inner.model.model.visual.register_forward_hook(
        lambda module, args, kwargs, out: grids.append(kwargs["grid_thw"].clone()), with_kwargs=True)
    try:
        results, _ = scorer.score(groups)
    finally:
        hook.remove()
    return results, grids


def test_policy_judge_requests_carry_the_clip(vlm):
    inner, media = vlm
    verifier = Recording(inner)
    groups = [
        Group("User: Transcript: it was fine.\nWhat is the sentiment?\nOptions: " + ", ".join(MOSEI_LABELS) + ".",
              ["\\boxed{positive}", "\\boxed{neutral}"], labels=MOSEI_LABELS, media=media),
        Group("User: What does the person intend to do?", ["They want to leave.", "They wave hello."], media=media),
    ]
    results, grids = run(verifier, PolicyJudgeScorer(verifier), groups)
    judged = [r for r in verifier.requests if r.stage == "judge"]
    assert len(judged) == 4 and all(r.media == media for r in judged)
    # 4 frames at 1 fps -> 2 temporal patches per request; the vision tower ran on every judged clip
    assert sum(len(g) for g in grids) == 4 and all(g[:, 0].tolist() == [2] * len(g) for g in grids)
    assert "They want to leave." in judged[2].messages[-1]["content"]  # free text: the proposed response itself
    assert all(len(r.verified) == 2 for r in results)


@pytest.mark.parametrize("evolving", [False, True], ids=["rar", "rler"])
def test_rubric_generators_carry_the_clip_and_the_judge_does_not(vlm, evolving):
    inner, media = vlm
    verifier = Recording(inner)
    seeded = {"persistent": [{"text": "The justification cites the speaker's words.", "weight": 1}],
              "active": [], "archived": []}
    groups = [
        Group("User: Transcript: I loved it.\nWhat is the sentiment?", ["<answer>positive</answer>"],
              labels=MOSEI_LABELS, media=media, key="new"),
        Group("User: Transcript: awful.\nWhat is the sentiment?", ["<answer>negative</answer>"],
              labels=MOSEI_LABELS, media=media, key="seeded"),
    ]
    scorer = RubricScorer(verifier, evolving=evolving, buffers={"seeded": seeded}, generator_max_tokens=8)
    _, grids = run(verifier, scorer, groups)
    stages = {}
    for request in verifier.requests:
        stages.setdefault(request.stage, []).append(request)
    assert len(stages["rubric_seed"]) == 1 and stages["rubric_seed"][0].media == media
    assert len(stages.get("rubric_generation", [])) == (2 if evolving else 0)
    assert all(r.media == media for r in stages.get("rubric_generation", []))
    judge = stages["rubric_judge"]
    assert judge and all(r.media is None for r in judge)  # D.3: the judge is text-only
    # the judge's question is D.3's generic task question, the same for both clips, without their transcripts
    shown = {r.messages[-1]["content"].split("Response:")[0] for r in judge}
    assert all("What is the sentiment of the speaker in this video? Answer with exactly one of:" in q for q in shown)
    assert not any("awful" in q or "loved" in q for q in shown)
    assert sum(len(g) for g in grids) == 1 + (2 if evolving else 0)  # one clip per generator request
