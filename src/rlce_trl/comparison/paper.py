"""The paper's comparison in numbers: Table 1 (with Table 6's seed spreads), the ablations of Tables 3-4, and each
method's training settings (appendix A, C.2, D.1-D.3 and Table 10), the values that `rlce-trl compare` prints beside
its own and that tests/entrypoints/test_recipes.py checks the shipped recipes against.

Scores are percentages on the test split with each task's metric (Table 5): LLM-judge accuracy on IntentQA and PrefEval
(PrefEval: the macro average over its three forms), binary weighted F1 on MOSEI, weighted F1 on UR-FUNNY.
"""

from __future__ import annotations

#: The model every method of Table 1 starts from; the paper's numbers are shown beside ours only for this model.
PAPER_MODEL = "Qwen/Qwen3.5-9B"

#: Table 1's columns: task key -> (column title, metric).
TASKS = {
    "intentqa": ("IntentQA", "LLM-judge accuracy"),
    "mosei": ("MOSEI", "binary weighted F1"),
    "urfunny": ("UR-FUNNY", "weighted F1"),
    "prefeval": ("PrefEval", "LLM-judge accuracy, macro over explicit / choice / persona"),
}

#: Method key (the recipe's suffix: `<task>_<method>.yaml`) -> (name in the table, how `rlce-trl compare` runs it).
#: "train": `rlce-trl train` with the recipe (a GRPO run with one reward method); "coevolve": `rlce-trl coevolve`.
METHODS = {
    "usc": ("Universal Self-Consistency", "train"),
    "policy_judge": ("Policy LLM-Judge", "train"),
    "video_zero": ("Video-Zero", "coevolve"),
    "visplay": ("VisPlay", "coevolve"),
    "rar": ("Rubrics as Rewards (static rubrics)", "train"),
    "rler": ("RLER (evolving rubrics)", "train"),
    "rlac": ("RLAC", "coevolve"),
    "rlce": ("RLCE", "train"),
    # not in Table 1: the two ablations (Tables 3-4) and TTRL (the paper reports it at test time only, Table 2)
    "rlce_static": ("RLCE, static tests (ablation)", "train"),
    "rlce_pointwise": ("RLCE, pointwise tests (ablation)", "train"),
    "ttrl": ("TTRL (trained on the train split)", "train"),
}

#: Table 1 / Table 6: the base model's test scores.
BASE = {"intentqa": 55.25, "mosei": 64.86, "urfunny": 63.11, "prefeval": 44.72}

#: Table 1 (means over three seeds) with Table 6's standard deviations: method -> task -> (mean, std).
TABLE1 = {
    "usc": {"intentqa": (56.77, 0.89), "mosei": (66.84, 1.28), "urfunny": (59.86, 1.96), "prefeval": (41.37, 6.16)},
    "policy_judge": {"intentqa": (57.33, 0.50), "mosei": (67.35, 1.77), "urfunny": (60.44, 2.20),
                     "prefeval": (46.73, 5.21)},
    "video_zero": {"intentqa": (55.06, 0.13), "mosei": (64.80, 0.21), "urfunny": (62.91, 0.92),
                   "prefeval": (43.30, 0.83)},
    "visplay": {"intentqa": (55.34, 0.99), "mosei": (65.00, 0.56), "urfunny": (64.96, 0.66),
                "prefeval": (42.55, 1.66)},
    "rar": {"intentqa": (55.60, 0.03), "mosei": (65.03, 0.17), "urfunny": (64.72, 1.58), "prefeval": (56.45, 0.95)},
    "rler": {"intentqa": (56.31, 0.63), "mosei": (65.19, 0.33), "urfunny": (64.52, 0.04), "prefeval": (56.12, 4.26)},
    "rlac": {"intentqa": (56.75, 0.66), "mosei": (67.15, 0.03), "urfunny": (61.96, 0.40), "prefeval": (55.27, 0.71)},
    "rlce": {"intentqa": (58.48, 1.59), "mosei": (70.93, 1.13), "urfunny": (69.46, 2.21), "prefeval": (75.38, 3.32)},
}

#: Tables 3-4 (one training run each, no spread): method -> task -> score. The RLCE rows of these tables come from
#: the same single run (77.77 on PrefEval), not from Table 1's three-seed mean.
ABLATIONS = {
    "rlce_static": {"mosei": 69.40, "prefeval": 46.57},
    "rlce_pointwise": {"intentqa": 56.61, "prefeval": 68.51},
}

#: RLCE's schedule per task (appendix C.2, in prompts): (examples per cycle, PPO mini-batch, max cycles, tests per
#: direction). One cycle is `examples // mini-batch` optimizer steps; RLCE is validated every second cycle.
RLCE_SCHEDULE = {
    "prefeval": (48, 16, 20, 1),
    "intentqa": (96, 16, 40, 1),
    "urfunny": (96, 16, 25, 6),
    "mosei": (320, 32, 45, 3),
}

#: Table 10 (Evolving and Static Rubrics): the settings that differ from RLCE's.
RUBRIC_SETTINGS = {
    "num_generations": 8,
    "learning_rate": 5e-7,
    "beta": 0.001,
    "max_completion_length": 1024,
    "clips_per_rollout_batch": 32,
    "optimizer_steps_per_rollout_batch": 1,
    "num_train_epochs": 4,
    "validation_steps": 12,
    "validation_patience": 6,
    "temperature": 1.0,
}

#: Appendix A: the rubric, self-consistency and judge baselines are validated every twelve optimizer steps.
BASELINE_VALIDATION_STEPS = 12


def validation_schedule(method: str, task: str) -> tuple[int | None, int | None]:
    """(validate every N optimizer steps, patience in validations) of a GRPO method on `task` under the paper's
    protocol (appendix A): RLCE and its ablations every second cycle with no early stop, the baselines every 12 steps
    (the rubric ones with Table 10's patience 6). Co-evolution methods validate after every round: (None, None)."""
    if method.startswith("rlce"):
        examples, mini_batch, _, _ = RLCE_SCHEDULE[task]
        return 2 * (examples // mini_batch), None
    if method in ("rar", "rler"):
        return RUBRIC_SETTINGS["validation_steps"], RUBRIC_SETTINGS["validation_patience"]
    if METHODS.get(method, ("", ""))[1] == "train":
        return BASELINE_VALIDATION_STEPS, None
    return None, None


def paper_score(method: str, task: str) -> tuple[float, float | None] | None:
    """The paper's (mean, std) of `method` on `task`: Table 1 / 6, else Tables 3-4 (one run: std None); None when the
    paper does not report it."""
    if method in TABLE1:
        return TABLE1[method].get(task)
    if task in ABLATIONS.get(method, {}):
        return ABLATIONS[method][task], None
    return None
