"""Video through GRPO training with a REAL (tiny, random) Qwen3.5 vision-language model and its Qwen3-VL processor on
generated clips, CPU: the frames reach generation, every log-probability forward (old, reference, loss) and the
verifier's requests; prompts are token for token those of `rlce-trl evaluate`.

Clips: 4, 6 and 12 seconds at 10 fps, sampled at 1 fps into 4, 6 and 8 frames (2, 3 and 4 temporal patches), so a
row given another row's clip is caught by its token count. Run in the venv with torchvision: `-m vlm tests/vlm`.
"""

from __future__ import annotations

import json
import re

import pytest
import torch
from datasets import Dataset
from fakes import ScriptedVerifier
from testing_utils import build_tiny_vlm, make_video

from rlce_trl import RLCEGRPOConfig, RLCEGRPOTrainer
from rlce_trl.data.hba import expand_videos, load_hba_split, with_frames
from rlce_trl.data.media import resolve
from rlce_trl.generation.generators import VisionLanguageGenerator

pytestmark = pytest.mark.vlm
pytest.importorskip("torchvision")
pytest.importorskip("av")

PROBLEM = "<video>\n<audio>\nTranscript: clip {k}\nWhat is the sentiment of the speaker in this video?"
CLIPS = {"c4.mp4": 4, "c6.mp4": 6, "c12.mp4": 12}
PATCHES = {"c4.mp4": 2, "c6.mp4": 3, "c12.mp4": 4}  # temporal patches of 4 / 6 / 8 frames


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory):
    return str(build_tiny_vlm(tmp_path_factory.mktemp("tiny-vlm")))


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    root = tmp_path_factory.mktemp("hba")
    (root / "media").mkdir()
    records = []
    for k, (name, seconds) in enumerate(CLIPS.items()):
        make_video(root / "media" / name, seconds=seconds)
        records.append({"problem": PROBLEM.format(k=k), "answer": "positive", "videos": [name]})
    path = root / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path, root / "media"


def dataset(split, task="mosei"):
    path, media = split
    return with_frames(Dataset.from_list(load_hba_split(path, task, "train")), media)


def by_length(completions, **kwargs):
    """A user reward that separates completions (random weights rarely name a label): gives the loss a gradient."""
    return [float(len(c[0]["content"])) for c in completions]


def args(tmp_path, **overrides):
    kwargs = {
        "output_dir": str(tmp_path / "out"), "per_device_train_batch_size": 6, "num_generations": 2,
        "max_completion_length": 4, "max_steps": 1, "learning_rate": 0.01, "logging_steps": 1, "report_to": "none",
        "bf16": False, "use_cpu": True, "gradient_checkpointing": False, "save_strategy": "no", "seed": 0,
        "use_vllm": False, "rlce_construction_max_tokens": 4, "rlce_validation_max_tokens": 2,
        "rlce_equivalence_max_tokens": 4,
    }
    return RLCEGRPOConfig(**{**kwargs, **overrides})


def verifier():
    """A scripted (FAKE) verifier that records the requests: the point is what reaches it, not what it says."""
    return ScriptedVerifier(lambda r: "yes" if r.stage == "validation" else "The speaker smiles.")


class PhaseCounter:
    """Counts vision-tower forwards per trainer phase (generate / old+ref log-probs / loss)."""

    def __init__(self, trainer):
        self.counts: dict[str, int] = {}
        self.phase = "other"
        towers = [trainer.model.model.visual]
        if trainer.ref_model is not None:
            towers.append(trainer.ref_model.model.visual)
        for k, tower in enumerate(towers):
            name = "ref" if k else "policy"
            tower.register_forward_hook(lambda *a, name=name: self._hit(name))
        for method in ("_generate_single_turn", "_compute_loss"):
            self._wrap(trainer, method)

    def _hit(self, tower):
        key = f"{self.phase}/{tower}"
        self.counts[key] = self.counts.get(key, 0) + 1

    def _wrap(self, trainer, method):
        original = getattr(trainer, method)

        def wrapped(*a, **k):
            self.phase = method
            try:
                return original(*a, **k)
            finally:
                self.phase = "other"

        setattr(trainer, method, wrapped)


def test_stock_trl_trains_video_rows_without_frames(tiny_vlm, split, tmp_path):
    """V-0, what TRL 1.16 does on its own (the reason for the mixin): the clip is re-sampled for generation and the
    loss never sees a frame. If this stops holding, TRL changed and `rlce_trl.trainer_video` must be re-read."""
    from trl import GRPOConfig, GRPOTrainer

    config = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=2, num_generations=2, max_steps=1,
                        max_completion_length=4, bf16=False, use_cpu=True, report_to="none", save_strategy="no")
    rows = dataset(split).select([2, 2])  # the 8-frame clip
    trainer = GRPOTrainer(model=tiny_vlm, reward_funcs=lambda completions, **k: [0.0, 1.0] * (len(completions) // 2),
                          args=config, train_dataset=rows)
    counter, grids = PhaseCounter(trainer), []
    generate = trainer._generate_single_turn
    trainer._generate_single_turn = lambda ids, images, fields, *a, **k: (
        grids.append(fields["video_grid_thw"].clone()), generate(ids, images, fields, *a, **k))[1]
    trainer.train()
    assert grids[0][:, 0].tolist() == [2, 2]  # 8 frames were re-sampled to 4 (2 temporal patches)
    assert counter.counts.get("_compute_loss/policy", 0) == 0  # the loss saw no pixels


def test_frames_reach_generation_every_logprob_forward_and_the_verifier(tiny_vlm, split, tmp_path):
    """V-1 and V-5: beta > 0 (reference model) and steps_per_generation=2 (old log-probs, two shuffled slices).
    IntentQA rows (free text): every distinct reply is an answer, so the verifier is asked."""
    scripted = verifier()
    trainer = RLCEGRPOTrainer(model=tiny_vlm, reward_funcs=by_length,
                              args=args(tmp_path, beta=0.1, steps_per_generation=2, per_device_train_batch_size=3,
                                        max_steps=2, max_completion_length=6),
                              train_dataset=dataset(split, "intentqa"), verifier=scripted)
    counter = PhaseCounter(trainer)
    seen = []
    original = trainer._compute_loss

    def loss(model, inputs):  # each row's clip: its prompt's video tokens match its own grid
        per_row = (inputs["prompt_ids"] == trainer._video_pad_token_id).sum(1).tolist()
        for tokens, grid, pixels in zip(per_row, inputs["video_grid_thw"], inputs["pixel_values_videos"], strict=True):
            assert tokens == int(grid.prod()) // 4 and pixels.shape[0] == int(grid.prod())
            seen.append(int(grid[0, 0]))
        return original(model, inputs)

    trainer._compute_loss = loss
    before = {n: p.detach().clone() for n, p in trainer.model.model.visual.named_parameters()}
    trainer.train()

    assert counter.counts.get("_generate_single_turn/policy", 0) >= 1
    assert counter.counts.get("other/policy", 0) >= 1  # old log-probs (steps_per_generation=2)
    assert counter.counts.get("other/ref", 0) >= 1  # reference log-probs
    assert counter.counts.get("_compute_loss/policy", 0) >= 2  # every micro-batch of the loss
    assert sorted(set(seen)) == [2, 3, 4]  # all three clips, each with its own grid
    changed = [not torch.equal(before[n], p) for n, p in trainer.model.model.visual.named_parameters()]
    assert any(changed)  # V-6: the vision tower received gradient
    # the verifier saw the clip in every request of every stage, as references (no pixels gathered)
    requests = [r for batch in scripted.batches for r in batch]
    assert requests and {r.stage for r in requests} >= {"equivalence", "construction", "validation"}
    assert all(r.media and "video" not in r.media[0] and r.media[0]["source"]["path"].endswith(".mp4")
               for r in requests)
    frames, metadata = resolve(requests[0].media[0])
    assert len(frames) == len(metadata["frames_indices"]) and frames[0].size == (320, 176)


def test_training_logprobs_equal_a_direct_forward_and_depend_on_the_frames(tiny_vlm, split, tmp_path):
    """V-2 and V-3: fp32, the trainer's per-token log-probs equal `model(**processor inputs)` to 1e-5, and change
    when the pixels change."""
    trainer = RLCEGRPOTrainer(model=tiny_vlm, args=args(tmp_path), train_dataset=dataset(split), verifier=verifier())
    rows = [dataset(split)[k] for k in (0, 0, 1, 1, 2, 2)]
    trainer.model.train()
    batch = trainer._generate_and_score_completions(rows)
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    keep = batch["completion_ids"].size(1)
    model = trainer.model.eval()
    trainer._video_ctx = (batch["pixel_values_videos"], batch["video_grid_thw"])
    with torch.no_grad():
        trained, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, keep, batch_size=2)
    trainer._video_ctx = None

    encoded = VisionLanguageGenerator(model, trainer.processing_class).encode(
        [expand_videos(r, split[1])["prompt"] for r in load_hba_split(split[0], "mosei", "train")])
    for k in range(6):  # one row at a time, straight from the processor: no padding, no trainer code
        row = k // 2
        m = encoded["attention_mask"][row].bool()
        prompt = encoded["input_ids"][row][m]
        assert torch.equal(prompt, batch["prompt_ids"][k][batch["prompt_mask"][k].bool()])
        grid = encoded["video_grid_thw"][row : row + 1]
        offset = int(encoded["video_grid_thw"][:row].prod(-1).sum())
        pixels = encoded["pixel_values_videos"][offset : offset + int(grid.prod())]
        completion = batch["completion_ids"][k][batch["completion_mask"][k].bool()]
        full = torch.cat([prompt, completion])[None]
        types = torch.cat([encoded["mm_token_type_ids"][row][m], torch.zeros_like(completion)])[None]
        with torch.no_grad():
            logits = model(input_ids=full, pixel_values_videos=pixels, video_grid_thw=grid,
                           mm_token_type_ids=types).logits[0, len(prompt) - 1 : -1]
        direct = logits.float().log_softmax(-1).gather(-1, completion[:, None])[:, 0]
        torch.testing.assert_close(trained[k][: len(completion)], direct, atol=1e-5, rtol=1e-5)

    noisy = [p + 0.5 * torch.randn_like(p) for p in batch["pixel_values_videos"]]
    trainer._video_ctx = (noisy, batch["video_grid_thw"])
    with torch.no_grad():
        perturbed, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, keep, batch_size=2)
    trainer._video_ctx = None
    real = batch["completion_mask"].bool()
    assert (perturbed - trained)[real].abs().max() > 1e-4  # the frames matter


def test_training_prompts_are_evaluation_prompts_token_for_token(tiny_vlm, split, tmp_path):
    """V-4: the ids TRL generates from are those `rlce-trl evaluate` generates from, 8 frames stay 8 (4 patches), and
    the timestamps are the clip's."""
    trainer = RLCEGRPOTrainer(model=tiny_vlm, args=args(tmp_path), train_dataset=dataset(split), verifier=verifier())
    rows = [dataset(split)[k] for k in range(3)]
    frames = []
    prompts = [trainer._detach_frames(r["prompt"], frames) for r in rows]
    trainer._video_frames = frames
    ids, images, fields = trainer._tokenize_prompts(prompts)
    trainer._video_frames = None
    generator = VisionLanguageGenerator(trainer.model, trainer.processing_class)
    evaluation = generator.encode([expand_videos(r, split[1])["prompt"] for r in load_hba_split(split[0], "mosei",
                                                                                                "test")])
    for k in range(3):
        m = evaluation["attention_mask"][k].bool()
        assert ids[k] == evaluation["input_ids"][k][m].tolist()
        assert fields["mm_token_type_ids"][k] == evaluation["mm_token_type_ids"][k][m].tolist()
    assert fields["video_grid_thw"][:, 0].tolist() == [2, 3, 4] and images is None
    text = trainer.processing_class.tokenizer.decode(ids[2])
    stamps = [float(t) for t in re.findall(r"<([0-9.]+) seconds>", text)]
    assert len(stamps) == 4 and 10.5 < stamps[-1] < 12.0  # the clip's own 10 fps, not the processor's 24-fps guess
    # the mixin's own mm_token_type_ids (rebuilt from ids in every forward) are the processor's
    rebuilt = trainer._video_token_types(torch.tensor([ids[2]]), 0)
    assert rebuilt[0].tolist() == fields["mm_token_type_ids"][2]


def test_text_and_images_inputs(tiny_vlm, split, tmp_path):
    """`video_input="text"` drops the frames everywhere; `"images"` hands them to TRL's multi-image path."""
    for mode in ("text", "images"):
        scripted = verifier()
        trainer = RLCEGRPOTrainer(model=tiny_vlm, args=args(tmp_path / mode, video_input=mode),
                                  train_dataset=dataset(split, "intentqa"), verifier=scripted)
        counter = PhaseCounter(trainer)
        trainer.train()
        loss_calls = counter.counts.get("_compute_loss/policy", 0)
        assert loss_calls == 0 if mode == "text" else loss_calls >= 1, (mode, counter.counts)
        requests = [r for batch in scripted.batches for r in batch]
        assert requests and all(r.media is None for r in requests)


def test_a_partner_of_a_vision_language_policy_is_a_vision_language_verifier(tiny_vlm, split, tmp_path):
    """A co-evolution phase on video: the frozen partner is loaded as a vision-language model, so it sees the clips
    (a text loader would drop them, or fail on the checkpoint)."""
    from rlce_trl.verifiers.vlm_backend import VisionLanguageVerifier

    trainer = RLCEGRPOTrainer(model=tiny_vlm, args=args(tmp_path, partner_model_name_or_path=tiny_vlm),
                              train_dataset=dataset(split), verifier=verifier())
    assert isinstance(trainer.partner, VisionLanguageVerifier) and trainer.partner.model is not trainer.model
