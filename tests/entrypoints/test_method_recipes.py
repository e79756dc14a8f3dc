"""A recipe for every method of the paper's comparison on every task it runs on (Table 1, plus the ablations of Tables
3-4), with the paper's settings: RLCE's shared ones (appendix C.2) for USC, the Policy LLM-Judge and TTRL (D.1-D.2:
"only the task reward differs"), Table 10's for the rubric baselines. The numbers come from
`rlce_trl.comparison.paper`, which these tests check against the paper's own table (Δ column) too; `rlce-trl recipes`
lists every one of them."""

import re

import pytest
from helpers import CONFIGS
from test_recipes import parse

from rlce_trl.cli import main
from rlce_trl.comparison import paper

TASKS = ["prefeval", "intentqa", "mosei", "urfunny"]
SHARED = ["usc", "policy_judge", "ttrl"]  # RLCE's setup, another reward
RUBRICS = ["rar", "rler"]

#: Table 1's Δ column as printed in the paper (a transcription check of paper.TABLE1 and paper.BASE).
DELTA = {
    "usc": (1.52, 1.98, -3.25, -3.35), "policy_judge": (2.08, 2.49, -2.67, 2.01),
    "video_zero": (-0.19, -0.06, -0.20, -1.42), "visplay": (0.09, 0.14, 1.85, -2.17),
    "rar": (0.35, 0.17, 1.61, 11.73), "rler": (1.06, 0.33, 1.41, 11.40), "rlac": (1.50, 2.29, -1.15, 10.55),
    "rlce": (3.23, 6.07, 6.35, 30.66),
}


def test_paper_table_transcription():
    assert list(paper.TASKS) == ["intentqa", "mosei", "urfunny", "prefeval"]  # Table 1's column order
    for method, deltas in DELTA.items():
        for task, delta in zip(paper.TASKS, deltas, strict=True):
            mean, std = paper.TABLE1[method][task]
            assert round(mean - paper.BASE[task], 2) == delta, (method, task)
            assert 0 <= std < 10
    assert set(paper.TABLE1) | set(paper.ABLATIONS) | {"ttrl"} == set(paper.METHODS)


@pytest.mark.parametrize("task", TASKS)
def test_every_method_has_a_recipe_on_every_task(task):
    for method, (_, runner) in paper.METHODS.items():
        path = CONFIGS / f"{task}_{method}.yaml"
        if method in paper.ABLATIONS and task not in paper.ABLATIONS[method]:
            continue  # the ablations only where Tables 3-4 report them
        assert path.is_file(), f"no recipe {path.name} for {method} on {task}"
        if runner == "train":
            recipe, _, _ = parse(path)
            assert recipe.get("reward_method", "rlce") in (method, "rlce")


def _shared_settings(args, model_args, rlce_args):
    keys = ["learning_rate", "beta", "num_generations", "generation_batch_size", "per_device_train_batch_size",
            "gradient_accumulation_steps", "max_steps", "temperature", "top_p", "top_k", "max_completion_length",
            "generation_kwargs", "epsilon", "loss_type", "scale_rewards", "num_iterations", "lr_scheduler_type",
            "rlce_verified_weight", "rlce_format_weight", "chat_template_kwargs"]
    return {k: getattr(args, k) for k in keys} | {"model": model_args.model_name_or_path}, {
        k: getattr(rlce_args, k) for k in keys} | {"model": model_args.model_name_or_path}


def _commented(path, key):
    match = re.search(rf"^# {key}: (\d+)\b", path.read_text(), re.M)
    return int(match.group(1)) if match else None


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("method", SHARED)
def test_shared_setup_baselines_are_rlce_with_another_reward(method, task):
    path = CONFIGS / f"{task}_{method}.yaml"
    _, (script_args, args, model_args), _ = parse(path)
    _, (rlce_script, rlce_args, _), _ = parse(CONFIGS / f"{task}_rlce.yaml")
    ours, theirs = _shared_settings(args, model_args, rlce_args)
    assert ours == theirs and model_args.model_name_or_path == paper.PAPER_MODEL
    assert args.reward_method == method and script_args.max_prompt_length == rlce_script.max_prompt_length
    assert script_args.tta_split is None  # trained on the train split (TTRL's test-time recipes are tta_*)
    steps, patience = paper.validation_schedule(method, task)
    assert (steps, patience) == (12, None) and _commented(path, "validation_steps") == steps
    assert args.save_steps == steps


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("method", RUBRICS)
def test_rubric_recipes_follow_table_10(method, task):
    path = CONFIGS / f"{task}_{method}.yaml"
    _, (script_args, args, model_args), _ = parse(path)
    t10 = paper.RUBRIC_SETTINGS
    assert args.reward_method == method and model_args.model_name_or_path == paper.PAPER_MODEL
    assert (args.num_generations, args.learning_rate, args.beta) == (
        t10["num_generations"], t10["learning_rate"], t10["beta"])
    assert args.max_completion_length == t10["max_completion_length"] and args.temperature == t10["temperature"]
    assert (args.num_train_epochs, args.max_steps) == (t10["num_train_epochs"], -1)
    # 32 clips x G=8 per rollout batch, one optimizer step per rollout batch (for the 8 processes recipes count)
    assert args.generation_batch_size == t10["clips_per_rollout_batch"] * args.num_generations
    per_step = args.per_device_train_batch_size * 8 * args.gradient_accumulation_steps
    assert per_step == args.generation_batch_size and args.num_iterations == t10["optimizer_steps_per_rollout_batch"]
    assert "bf16: true" in path.read_text()
    assert args.vllm_max_model_length == script_args.max_prompt_length + args.max_completion_length
    assert (_commented(path, "validation_steps"), _commented(path, "validation_patience")) == (
        t10["validation_steps"], t10["validation_patience"]) == paper.validation_schedule(method, task)


@pytest.mark.parametrize(("name", "mode"), [("mosei_rlce_static", "static"), ("intentqa_rlce_pointwise", "pointwise"),
                                            ("prefeval_rlce_static", "static"),
                                            ("prefeval_rlce_pointwise", "pointwise")])
def test_ablation_recipes_are_rlce_with_one_knob(name, mode):
    task = name.split("_")[0]
    _, (_, args, model_args), _ = parse(CONFIGS / f"{name}.yaml")
    _, (_, rlce_args, _), _ = parse(CONFIGS / f"{task}_rlce.yaml")
    ours, theirs = _shared_settings(args, model_args, rlce_args)
    assert ours == theirs and args.rlce_mode == mode and rlce_args.rlce_mode == "evolving"
    assert args.rlce_tests_per_direction == rlce_args.rlce_tests_per_direction
    assert task in paper.ABLATIONS[f"rlce_{mode}"]


def test_rlce_validation_interval_matches_its_recipe_comment():
    for task in TASKS:
        assert _commented(CONFIGS / f"{task}_rlce.yaml", "validation_steps") == paper.validation_schedule(
            "rlce", task)[0]


def test_recipes_command_lists_every_method_recipe(capsys):
    assert main(["recipes"]) == 0
    listing = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()}
    for task in TASKS:
        for method in [*SHARED, *RUBRICS, "rlce", "rlac", "visplay", "video_zero"]:
            assert f"{task}_{method}" in listing


def test_readme_names_every_method_recipe():
    from helpers import ROOT

    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### The comparison (Table 1)"):]
    section = " ".join(section[: section.index("\n### ", 5)].split())  # one line
    for method in paper.METHODS:
        if method in paper.ABLATIONS:
            for task in paper.ABLATIONS[method]:
                assert f"`{task}_{method}`" in section, method
        else:
            assert f"`<task>_{method}`" in section, method
    t10 = paper.RUBRIC_SETTINGS
    assert f"G={t10['num_generations']}, lr 5e-7, KL {t10['beta']}" in section
    assert f"validation every {t10['validation_steps']} steps, patience {t10['validation_patience']}" in section
    assert "rlce-trl compare" in section
