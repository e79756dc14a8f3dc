"""The paper's comparison in numbers: Table 1 (with Table 6's seed spreads), the ablations of Tables 3-4, and each
method's training settings (appendix A, C.2, D.1-D.3 and Table 10), the values that `rlce-trl compare` prints beside
its own and that tests/entrypoints/test_recipes.py checks the shipped recipes against.

The numbers themselves are part of each task's definition (`rlce_trl.data.tasks`, a task's `paper`); this module
assembles them into the tables. Scores are percentages on the test split with each task's metric (Table 5).
"""

from __future__ import annotations

from ..data.tasks import paper_tasks

#: The model every method of Table 1 starts from; the paper's numbers are shown beside ours only for this model.
PAPER_MODEL = "Qwen/Qwen3.5-9B"

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


#: Table 1's columns: task key -> (column title, metric).
TASKS = {t.name: (t.paper.title, t.paper.metric) for t in paper_tasks()}

#: Table 1 / Table 6: the base model's test scores.
BASE = {t.name: t.paper.base for t in paper_tasks()}

#: Table 1 (means over three seeds) with Table 6's standard deviations: method -> task -> (mean, std).
TABLE1 = {m: {t.name: t.paper.table1[m] for t in paper_tasks() if m in t.paper.table1}
          for m in METHODS if any(m in t.paper.table1 for t in paper_tasks())}

#: Tables 3-4 (one training run each, no spread): method -> task -> score. The RLCE rows of these tables come from
#: the same single run (77.77 on PrefEval), not from Table 1's three-seed mean.
ABLATIONS = {m: {t.name: t.paper.ablations[m] for t in paper_tasks() if m in t.paper.ablations}
             for m in METHODS if any(m in t.paper.ablations for t in paper_tasks())}

#: RLCE's schedule per task (appendix C.2, in prompts): (examples per cycle, PPO mini-batch, max cycles, tests per
#: direction). One cycle is `examples // mini-batch` optimizer steps; RLCE is validated every second cycle.
RLCE_SCHEDULE = {t.name: t.paper.rlce_schedule for t in paper_tasks()}

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
