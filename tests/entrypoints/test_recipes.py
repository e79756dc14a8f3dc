"""Every YAML recipe under configs/ parses with the installed TRL through its example script's parser: no unknown key,
no deprecation warning, and the paper's GRPO settings (appendix C.2) where a recipe claims them."""

import warnings

import pytest
import torch
import yaml
from helpers import CONFIGS, load_example

# TRL-parser recipes; the Elect one (it names a `gate`) has an argparse script: tests/elect/test_elect_recipe.py
RECIPES = sorted(p for p in CONFIGS.glob("*.yaml") if "gate" not in yaml.safe_load(p.read_text()))
PAPER = {  # recipe: (examples per cycle, PPO mini-batch, max cycles, tests per direction, rlce_mode)
    "prefeval_rlce": (48, 16, 20, 1, "evolving"),
    "prefeval_rlce_static": (48, 16, 20, 1, "static"),
    "prefeval_rlce_pointwise": (48, 16, 20, 1, "pointwise"),
    "intentqa_rlce": (96, 16, 40, 1, "evolving"),
    "urfunny_rlce": (96, 16, 25, 6, "evolving"),
    "mosei_rlce": (320, 32, 45, 3, "evolving"),
}


def parse(path):
    recipe = yaml.safe_load(path.read_text())
    if "coevolve_method" in recipe:  # co-evolution recipes: every phase parses them with the phase parser
        from rlce_trl.coevolution import phase as script
    else:
        script = load_example("train_hba" if "hba_task" in recipe else "train_prefeval")
    args = ["--config", str(path)]
    if recipe.get("bf16") and not torch.cuda.is_available():
        args += ["--bf16", "false"]  # transformers refuses bf16 without an accelerator; everything else as written
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parsed = script.make_parser().parse_args_and_config(args)  # fail_with_unknown_args=True
    deprecations = [f"{w.category.__name__}: {w.message}" for w in caught
                    if issubclass(w.category, (DeprecationWarning, FutureWarning, PendingDeprecationWarning))]
    return recipe, parsed, deprecations


def test_the_expected_recipes_exist():
    names = {p.stem for p in RECIPES}
    assert set(PAPER) | {"quickstart"} <= names


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_recipe_parses_without_unknown_keys_or_deprecations(path):
    recipe, (script_args, training_args, model_args), deprecations = parse(path)
    assert not deprecations, deprecations
    # every key landed somewhere (TrlParser would have raised otherwise); spot-check that values arrived
    for key, value in recipe.items():
        holders = [a for a in (script_args, training_args, model_args) if hasattr(a, key)]
        assert holders, key
        if key not in ("bf16", "lr_scheduler_type", "optim", "output_dir", "report_to", "save_strategy"):
            assert getattr(holders[0], key) == value, key


@pytest.mark.parametrize("name", sorted(PAPER))
def test_paper_settings(name):
    epc, mini_batch, cycles, tests, mode = PAPER[name]
    _, (script_args, args, model_args), _ = parse(CONFIGS / f"{name}.yaml")
    assert model_args.model_name_or_path == "Qwen/Qwen3.5-9B"
    assert args.chat_template_kwargs == {"enable_thinking": False}
    assert (args.num_generations, args.beta, args.learning_rate, args.num_iterations) == (4, 0.01, 1e-6, 1)
    assert args.lr_scheduler_type == "constant" and args.warmup_steps == 0 and args.entropy_coef == 0.0
    assert (args.temperature, args.top_p, args.top_k, args.repetition_penalty) == (1.0, 0.95, 20, 1.0)
    assert args.generation_kwargs == {"presence_penalty": 1.5} and args.max_completion_length == 512
    assert args.scale_rewards == "group" and args.loss_type == "grpo"  # Eq. 6: per-sequence mean
    assert not model_args.use_peft  # full fine-tuning; --use_peft switches to LoRA
    assert script_args.max_prompt_length == (8192 if name.startswith("prefeval") else 4096)
    # batch mapping, for the 8 processes the recipes are written for
    G, processes = args.num_generations, 8
    per_step = args.per_device_train_batch_size * processes * args.gradient_accumulation_steps
    assert args.generation_batch_size == epc * G
    assert per_step == mini_batch * G
    assert args.max_steps == cycles * (epc // mini_batch)
    assert (args.rlce_tests_per_direction, args.rlce_mode) == (tests, mode)
    assert (args.rlce_verified_weight, args.rlce_format_weight) == (0.8, 0.2)
    assert (args.rlce_construction_temperature, args.rlce_construction_top_p, args.rlce_construction_top_k) == (
        1.0, 0.95, 20)


def test_quickstart_is_offline_cpu():
    _, (script_args, args, model_args), _ = parse(CONFIGS / "quickstart.yaml")
    assert model_args.model_name_or_path == "smollm2-135m-instruct" and script_args.dataset_name == "sample"
    assert args.use_cpu and not args.bf16 and not args.use_vllm
    assert args.save_strategy == "steps" and args.max_steps % args.save_steps == 0


@pytest.mark.parametrize("name", ["single_gpu", "multi_gpu", "zero3"])
def test_accelerate_configs(name):
    config = yaml.safe_load((CONFIGS / "accelerate" / f"{name}.yaml").read_text())
    expected = {"single_gpu": "NO", "multi_gpu": "MULTI_GPU", "zero3": "DEEPSPEED"}[name]
    assert config["distributed_type"] == expected
    if name == "zero3":
        assert config["deepspeed_config"]["zero_stage"] == 3
    assert (CONFIGS / "accelerate" / "README.md").exists()


SELFPLAY = {  # method: (rounds, phase steps, G per phase, completions per step on 3 GPUs, max response per phase)
    "visplay": (3, {"questioner": 20, "reasoner": 20}, (8, 8), (240, 240), (2048, 1024)),
    "video_zero": (5, {"questioner": 2, "solver": 1}, (4, 5), (1200, 1275), (4096, 2048)),
}


@pytest.mark.parametrize("task", ["prefeval", "intentqa", "mosei", "urfunny"])
@pytest.mark.parametrize("method", sorted(SELFPLAY))
def test_selfplay_paper_settings(method, task):
    """VisPlay (Tables 11-12) and Video-Zero (Tables 13-14) recipes: the paper's numbers, the batch mapping for the
    paper's 3 GPUs, video through the video path on the HBA tasks (Video-Zero on PrefEval is text only)."""
    from rlce_trl.coevolution.registry import get_method

    rounds, steps, groups, per_step, lengths = SELFPLAY[method]
    recipe, (script_args, args, model_args), _ = parse(CONFIGS / f"{task}_{method}.yaml")
    assert script_args.coevolve_method == method and script_args.coevolve_rounds == rounds
    assert script_args.coevolve_phase_steps == steps and model_args.model_name_or_path == "Qwen/Qwen3.5-9B"
    assert (args.learning_rate, args.beta, args.temperature) == (1e-6, 0.01, 1.0)
    assert args.top_p == (0.99 if method == "visplay" else 1.0)
    assert (args.rlce_verified_weight, args.rlce_format_weight) == (1.0, 0.0)  # the scorer is the whole reward
    assert script_args.hba_task == (None if task == "prefeval" else task)
    assert ("video_input" in recipe) == (task != "prefeval") and args.use_vllm == (task == "prefeval")
    if task != "prefeval":
        fps, frames, height = (1.0, 8, 176) if method == "visplay" else (2.0, 32, 168)
        assert (args.video_fps, args.video_max_frames, args.video_frame_height) == (fps, frames, height)
    phases = {"questioner": {}, **script_args.coevolve_phase_overrides}
    for role, g, completions, length in zip(steps, groups, per_step, lengths, strict=True):
        keys = {**vars(args), **{k: v for k, v in phases.get(role, {}).items() if k != "reward_method_kwargs"}}
        assert keys["num_generations"] == g and keys["max_completion_length"] == length, role
        one_process = keys["per_device_train_batch_size"] * keys["gradient_accumulation_steps"]
        assert one_process * 3 == completions and completions % g == 0 and one_process % g == 0, role
    partner = script_args.coevolve_phase_overrides["questioner"]["reward_method_kwargs"]
    build = script_args.coevolve_build_kwargs
    if method == "visplay":  # m = 10 scoring at top-k 40; N = 8 on 1,000 clips, m = 9, [0.3, 0.8], cap 600
        assert (partner["m"], partner["top_k"], partner["distance_threshold"]) == (10, 40, 0.5)
        assert (build["n_clips"], build["n_candidates"], build["m"], build["cap"]) == (1000, 8, 9, 600)
        assert script_args.coevolve_corpus_size is None  # the questioner draws from the whole split
    else:  # m = 5 with the clip + 5 blind; 600 clips, m = 10 pseudo-labels, early stop after 2
        assert (partner["m"], partner["m_blind"], build["m"], build["margin"]) == (5, 5, 10, 2)
        assert script_args.coevolve_corpus_size == 600 and script_args.coevolve_patience == 2
    assert (build["lo"], build["hi"]) == (0.3, 0.8)
    get_method(method, script_args.settings())  # the build options are the builder's


@pytest.mark.parametrize("method", sorted(SELFPLAY))
def test_selfplay_quickstarts_are_offline_cpu(method):
    from rlce_trl.coevolution.registry import get_method

    _, (script_args, args, model_args), _ = parse(CONFIGS / f"quickstart_{method}.yaml")
    assert model_args.model_name_or_path == "smollm2-135m-instruct" and args.use_cpu and not args.use_vllm
    assert script_args.coevolve_rounds == 1 and set(script_args.coevolve_phase_steps.values()) == {1}
    assert script_args.coevolve_build_kwargs["m"] == 2 and args.verifier_mode == "transformers"
    get_method(method, script_args.settings())
