"""Server and colocate modes send a request's clip as OpenAI-compatible content parts (against the FAKE server of
fakes.py; a real vLLM serving a vision-language model is tried in tests/vlm)."""

from __future__ import annotations

import json

import pytest

from rlce_trl.data.hba import expand_videos, load_hba_split
from rlce_trl.data.media import media_items, openai_messages
from rlce_trl.verifiers.base import Request

pytest.importorskip("av")
from testing_utils import make_video


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    root = tmp_path_factory.mktemp("clips")
    make_video(root / "b.mp4", seconds=5)
    split = root / "train.jsonl"
    split.write_text(json.dumps({"problem": "<video>\nWhat does the person intend?", "answer": "x",
                                 "videos": ["b.mp4"]}) + "\n")
    return split, root


def test_server_requests_carry_the_frames_as_openai_content_parts(clips, fake_server):
    from rlce_trl.verifiers.server import ServerVerifier

    split, media = clips
    prompt = expand_videos(load_hba_split(split, "intentqa", "train")[0], media)["prompt"]
    items = media_items(prompt)
    messages = [{"role": "system", "content": "Be careful."}, {"role": "user", "content": "### Input\nQ"}]
    parts = openai_messages(messages, items)[1]["content"]
    frames = [p for p in parts if p["type"] == "image_url"]
    assert len(frames) == 4 and frames[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert parts[0]["text"] == "Video (4 frames at 0, 1.6, 3.3, 4.9 s):" and parts[-1]["text"] == "### Input\nQ"
    assert openai_messages(messages, None) == messages

    with ServerVerifier(fake_server.url, max_retries=0) as verifier:
        (reply,) = verifier.generate([Request(messages=messages, media=items, stage="validation")])
    assert reply.error is None
    sent = fake_server.bodies[-1]["messages"][1]["content"]
    assert [p["type"] for p in sent].count("image_url") == 4
