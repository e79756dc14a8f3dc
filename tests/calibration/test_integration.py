"""The opt-in seams: config fields, the evidence pipeline with a prompts file, and the label-light model-card line."""

import json
from types import SimpleNamespace

import pytest
from fakes import LogprobVerifier, lp

from rlce_trl.config import RLCEGRPOConfig
from rlce_trl.evidence.pipeline import EvidencePipeline
from rlce_trl.evidence.prompt_set import VerifierPrompts
from rlce_trl.model_card import _label_light
from rlce_trl.scoring import Group
from rlce_trl.verifiers.calibrated import CalibratedVerifier, VerdictCalibration


def config(tmp_path, **kw):
    return RLCEGRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        bf16=False,
        num_generations=2,
        per_device_train_batch_size=2,
        report_to="none",
        **kw,
    )


def test_config_reads_both_files_and_names_bad_ones(tmp_path):
    prompts = VerifierPrompts(validation="Claim: {test}\nYes or no?", version="p3", calibrated_on=50)
    prompts.save(tmp_path / "p.json")
    VerdictCalibration("p3", {"yes": 0.8, "no": 0.15, "unknown": 0.05}, 0.3, 50).save(tmp_path / "c.json")
    args = config(
        tmp_path, rlce_prompts_file=str(tmp_path / "p.json"), rlce_verdict_calibration_file=str(tmp_path / "c.json")
    )
    assert args.evidence_settings().prompts == prompts
    assert config(tmp_path).evidence_settings().prompts is None  # off by default
    line = _label_light(args)
    assert (
        line.startswith("**label-light**") and "50 labelled calibration cases" in line and "50 labelled claims" in line
    )
    assert _label_light(SimpleNamespace()) is None
    (tmp_path / "bad.json").write_text(json.dumps({"validation": "no slot"}))
    with pytest.raises(
        ValueError, match=r"rlce_prompts_file: .*needs the slot \{test\}.*\n- rlce_verdict_calibration_file"
    ):
        config(
            tmp_path,
            rlce_prompts_file=str(tmp_path / "bad.json"),
            rlce_verdict_calibration_file=str(tmp_path / "missing.json"),
        )


class Recording(LogprobVerifier):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.seen = []

    def _generate(self, requests):
        self.seen += requests
        return [
            r if q.stage == "validation" else type(r)(["The user said so."] * q.sampling.n, ["stop"] * q.sampling.n)
            for q, r in zip(requests, super()._generate(requests), strict=True)
        ]


def test_pipeline_uses_the_prompts_and_calibrated_verdicts():
    from rlce_trl.evidence.pipeline import EvidenceSettings

    inner = Recording({"The user said so.": lp(0.6, 0.35, 0.05)}, default=lp(0.6, 0.35, 0.05))
    prompts = VerifierPrompts(
        validation="[v9] Claim: {test}",
        construction="[c9] {favoured} vs {other}",
        examples=({"kind": "validation", "context": "x", "test": "y", "verdict": "no"},),
    )
    calibrated = CalibratedVerifier(inner, VerdictCalibration(prior={"yes": 0.8, "no": 0.15, "unknown": 0.05}))
    pipeline = EvidencePipeline(calibrated, EvidenceSettings(prompts=prompts, tie_break_tests_per_direction=0))
    group = Group(
        context="User: hi", completions=["\\boxed{positive}", "\\boxed{negative}"], labels=("positive", "negative")
    )
    _, stats = pipeline.score([group])
    validation = [r for r in inner.seen if r.stage == "validation"]
    construction = [r for r in inner.seen if r.stage == "construction"]
    assert validation and all("[v9]" in r.messages[-1]["content"] and len(r.messages) == 4 for r in validation)
    assert construction and all("[c9]" in r.messages[-1]["content"] for r in construction)
    assert stats.verdicts["no"] == len(validation)  # calibrated: raw argmax would have been "yes"


def test_paper_recipes_stay_label_free_and_the_quickstart_calibration_resolves():
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[2]
    recipes = [
        p for p in [*root.glob("configs/*.yaml"), *root.glob("src/rlce_trl/**/*.yaml")] if "accelerate" not in p.parts
    ]
    assert recipes
    label_light = {"rlce_prompts_file", "rlce_verdict_calibration_file"}
    for path in recipes:
        recipe = yaml.safe_load(path.read_text()) or {}
        if path.stem != "quickstart":
            assert not label_light & set(recipe), f"{path.name} is a paper recipe: no labelled calibration"
        elif recipe.get("rlce_verdict_calibration_file"):
            assert VerdictCalibration.load(recipe["rlce_verdict_calibration_file"]).fitted_on > 0
