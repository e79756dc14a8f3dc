"""`rlce-trl sample` / `rlce-trl select` on HBA video rows with a REAL tiny Qwen3.5 VLM (built locally) and generated
clips: a resumable pool whose rows carry the clip reference and frame count, RLCE best-of-n whose verifier sees the
clip, Elect with the clip's frame count, and the one-line refusals (text model, vLLM, no media root). `-m vlm`."""

from __future__ import annotations

import argparse
import importlib.util
import json

import pytest
from testing_utils import build_tiny_vlm, make_video

from rlce_trl.cli import main

pytestmark = [
    pytest.mark.vlm,
    pytest.mark.skipif(not all(importlib.util.find_spec(m) for m in ("torchvision", "av")),
                       reason="video rows need torchvision (transformers' video processor) and PyAV"),
]

PROBLEM = "<video>\n<audio>\nTranscript: {text}\nWhat is the sentiment of the speaker in this video?"
CLIPS = {"a.mp4": 4, "b.mp4": 6}  # seconds at 10 fps -> 4 and 6 frames at 1 fps


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("sample-video")
    (root / "media").mkdir()
    records = []
    for k, (name, seconds) in enumerate(CLIPS.items()):
        make_video(root / "media" / name, seconds=seconds)
        records.append({"problem": PROBLEM.format(text=f"clip {k}"), "answer": "positive", "videos": [name]})
    (root / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return root, build_tiny_vlm(root / "vlm")


def _sample_argv(root, model, pool, *extra):
    return ["sample", "--model_name_or_path", str(model), "--hba_task", "mosei", "--data", str(root / "test.jsonl"),
            "--media_root", str(root / "media"), "--output_dir", str(pool), "--n", "2", "--max_new_tokens", "4",
            "--dtype", "float32", *extra]


def test_sample_video_rows_resumes_and_select_reads_the_pool(setup, tmp_path, capsys):
    root, model = setup
    pool = tmp_path / "pool"
    argv = _sample_argv(root, model, pool)
    assert main(argv) == 0
    lines = (pool / "pool.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["num_frames"] for r in rows] == [4, 6] and [r["videos"] for r in rows] == [["a.mp4"], ["b.mp4"]]
    for row in rows:
        (block,) = [b for m in row["prompt"] if isinstance(m["content"], list) for b in m["content"]
                    if b["type"] == "video"]
        assert "video" not in block and block["source"]["path"].endswith(row["videos"][0])  # a reference, no pixels
        assert len(block["metadata"]["frames_indices"]) == row["num_frames"]
        assert f"numbered 1 to {row['num_frames']}" in row["prompt"][0]["content"][0]["text"]  # --style elect
        assert len(row["candidates"]) == 2 and row["greedy"]["temperature"] == 0.0 and row["gold"] == "positive"
        for c in [row["greedy"], *row["candidates"]]:
            assert 1 <= len(c["token_logprobs"]) <= 4 and all(lp <= 0 for lp in c["token_logprobs"])
    assert rows[0]["candidates"][0]["seed"] != rows[0]["candidates"][1]["seed"]
    # --style elect: Eq. 13's candidates, each clip perturbed as its record says (greedy: the clip as it is)
    assert [c["temperature"] for c in rows[0]["candidates"]] == [0.2, 0.7]
    assert rows[0]["greedy"]["perturbation"] is None
    assert [c["perturbation"] for c in rows[0]["candidates"]] == [
        {"crop": "center", "blur": 0.5, "brightness": 0.0}, {"crop": "top_left", "blur": 0.0, "brightness": 0.1}]

    # killed while writing the second row: the same command samples that row again, identically (seeded per spec)
    (pool / "pool.jsonl").write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])
    capsys.readouterr()
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["sampled"] == 1
    assert (pool / "pool.jsonl").read_text().splitlines() == lines
    assert main([*argv, "--video_max_frames", "4"]) == 2  # other frame settings: refused, not mixed into the pool
    assert "other settings (frames)" in capsys.readouterr().err

    out = tmp_path / "select"
    assert main(["select", "--pool", str(pool), "--output_dir", str(out), "--selectors", "majority,elect,oracle",
                 "--budgets", "1,2", "--subsets", "2"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows"] == 2 and set(summary["selectors"]) == {"majority", "elect", "oracle"}
    assert set(summary["selectors"]["elect"]["budgets"]) == {"1", "2"}


def test_rlce_best_of_n_verifier_sees_the_clip_and_elect_counts_its_frames(setup, tmp_path):
    """A pool written by other code (scripted answers on the sampled rows): RLCE best-of-n with the tiny VLM as
    verifier runs its vision tower on each row's frames; Elect parses citations against the clip's T."""
    import torch

    from rlce_trl.cli import select
    from rlce_trl.verifiers.vlm_backend import VisionLanguageVerifier, load_frozen_vlm

    root, model = setup
    pool = tmp_path / "pool"
    assert main(_sample_argv(root, model, pool, "--n", "1")) == 0
    rows = [json.loads(line) for line in (pool / "pool.jsonl").read_text().splitlines()]
    texts = ["<think>frame 1 smiles</think><keyframes>1,2</keyframes><answer>positive</answer>",
             "<think>frame 2 frowns</think><keyframes>2</keyframes><answer>negative</answer>"]
    for row in rows:
        row["candidates"] = [{"text": t} for t in texts]
    (pool / "pool.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    verifier = VisionLanguageVerifier(*load_frozen_vlm(str(model), dtype=torch.float32), batch_size=4)
    grids = []
    hook = verifier.model.model.visual.register_forward_hook(
        lambda module, args, kwargs, out: grids.extend(kwargs["grid_thw"][:, 0].tolist()), with_kwargs=True)
    parser = argparse.ArgumentParser()
    select.add_arguments(parser)
    args = parser.parse_args(["--pool", str(pool), "--output_dir", str(tmp_path / "sel"), "--selectors",
                              "rlce,elect,elect_noframes", "--budgets", "2", "--rlce_max_tokens", "6"])
    try:
        assert select.main(args, verifier=verifier) == 0
    finally:
        hook.remove()
    summary = json.loads((tmp_path / "sel" / "summary.json").read_text())
    assert summary["selectors"]["rlce"]["cost_per_row"]["calls"] > 0 and summary["unparsed_candidates"] == 0
    assert grids and set(grids) <= {2, 3}  # 4 and 6 frames: 2 and 3 temporal patches; every request had its clip
    assert summary["pool_stats"]["cited_fraction"] == pytest.approx((2 / 4 + 1 / 4 + 2 / 6 + 1 / 6) / 4)

    # the CLI loads the verifier as a VLM for a video pool
    assert main(["select", "--pool", str(pool), "--output_dir", str(tmp_path / "sel2"), "--selectors", "rlce",
                 "--budgets", "2", "--rlce_max_tokens", "6", "--verifier_model_name_or_path", str(model)]) == 0


def test_video_rows_refuse_text_models_vllm_and_missing_media_root(setup, tiny_model_dir, tmp_path, capsys):
    root, model = setup
    pool = tmp_path / "pool"
    assert main(_sample_argv(root, tiny_model_dir, pool)) == 2
    err = capsys.readouterr().err
    assert "text-only" in err and "vision-language checkpoint" in err and len(err.strip().splitlines()) == 1
    assert main([*_sample_argv(root, model, pool), "--backend", "vllm"]) == 2
    assert "--backend transformers" in capsys.readouterr().err
    argv = _sample_argv(root, model, pool)
    k = argv.index("--media_root")
    assert main(argv[:k] + argv[k + 2 :]) == 2
    assert "--media_root" in capsys.readouterr().err
    (root / "media" / "gone.mp4").write_bytes(b"")
    (tmp_path / "bad.jsonl").write_text(json.dumps({"problem": PROBLEM.format(text="x"), "answer": "positive",
                                                    "videos": ["gone.mp4"]}) + "\n")
    argv[argv.index("--data") + 1] = str(tmp_path / "bad.jsonl")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "gone.mp4 (empty)" in err and len(err.strip().splitlines()) == 1

    # a video pool (clip reference in the prompt) with a text verifier: refused before any selection
    from rlce_trl.data.hba import frame_source

    video = {"type": "video", "source": frame_source(root / "media" / "a.mp4"), "metadata": None}
    row = {"id": "v", "prompt": [{"role": "user", "content": [video, {"type": "text", "text": "q"}]}],
           "num_frames": 4, "candidates": [{"text": "<answer>a</answer>"}, {"text": "<answer>b</answer>"}]}
    (tmp_path / "pool.jsonl").write_text(json.dumps(row) + "\n")
    assert main(["select", "--pool", str(tmp_path / "pool.jsonl"), "--output_dir", str(tmp_path / "sel"),
                 "--selectors", "rlce", "--verifier_model_name_or_path", tiny_model_dir]) == 2
    err = capsys.readouterr().err
    assert "--verifier_model_name_or_path" in err and "this pool holds video rows" in err
    assert len(err.strip().splitlines()) == 1


def test_vision_language_sample_is_seeded_per_spec_with_raw_logprobs(setup):
    """A candidate depends only on its prompt and spec (not on the other specs, nor the caller's RNG), and its token
    log-probabilities are the raw model's (teacher-forced with the same frames)."""
    import torch

    from rlce_trl.data.hba import expand_videos, load_hba_split
    from rlce_trl.generation.generators import VisionLanguageGenerator
    from rlce_trl.generation.sampling import Sampling

    root, model = setup
    generator = VisionLanguageGenerator.from_pretrained(str(model), max_new_tokens=5, dtype="float32")
    prompt = expand_videos(load_hba_split(root / "test.jsonl", "mosei", "test")[1], root / "media")["prompt"]
    a = Sampling(temperature=1.0, top_p=0.95, top_k=20, seed=3)
    b = Sampling(temperature=1.0, top_p=0.95, top_k=20, seed=4)
    (both,) = generator.sample([prompt], [Sampling(temperature=0.0), a, b])
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    (alone,) = generator.sample([prompt], [b])
    assert torch.rand(1) == before  # the caller's RNG is untouched
    assert alone[0] == both[2] and both[1] != both[2]  # b's candidate does not depend on the specs before it

    tok, model = generator.processor.tokenizer, generator.model
    batch = generator.encode([prompt])
    start = batch["input_ids"].shape[1]
    for spec, cand in zip([Sampling(temperature=0.0), a, b], both, strict=True):
        torch.manual_seed(spec.seed)  # the same draw, by hand: ids, then the raw model's log-probabilities
        kwargs = {"do_sample": False} if spec.temperature == 0 else {
            "do_sample": True, "temperature": spec.temperature, "top_p": spec.top_p, "top_k": spec.top_k}
        ids = model.generate(**batch, max_new_tokens=5, suppress_tokens=[generator.processor.video_token_id,
                                                                         generator.processor.image_token_id],
                             pad_token_id=tok.pad_token_id, **kwargs)[:, start:]
        n = len(cand.token_logprobs)
        assert n > 0 and tok.decode(ids[0, :n], skip_special_tokens=True) == cand.text
        full = {**batch, "input_ids": torch.cat([batch["input_ids"], ids[:, :n]], 1),
                "attention_mask": torch.ones(1, start + n, dtype=torch.long)}
        if "mm_token_type_ids" in batch:  # text tokens after the prompt
            full["mm_token_type_ids"] = torch.cat([batch["mm_token_type_ids"], torch.zeros_like(ids[:, :n])], 1)
        with torch.no_grad():
            logits = model(**full).logits[0, start - 1 : -1].float().log_softmax(-1)
        assert cand.token_logprobs == pytest.approx(logits.gather(-1, ids[0, :n, None]).squeeze(-1).tolist(), abs=1e-4)
