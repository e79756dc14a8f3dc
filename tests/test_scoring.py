"""The scorer seam: `GroupScorer`, `ScorerBase`, the registry's dotted paths and `reward_method_kwargs`, and a user's
scorer in a real tiny GRPO step (by dotted path and by `group_scorer=`)."""

import subprocess
import sys

import pytest
from datasets import Dataset
from testing_utils import preference_rows, tiny_grpo_args
from user_scorer import CenteredOnBatch, LabelMatch, ShortestWins, length_format

from rlce_trl import RLCEGRPOConfig
from rlce_trl.methods import build_scorer
from rlce_trl.scoring import Group, GroupScorer, ScorerBase, StepStats, as_group_scorer

CPU = dict(bf16=False, use_cpu=True, report_to="none", per_device_train_batch_size=8)


def test_config_imports_neither_the_registry_nor_the_pipeline():
    code = ("import sys, rlce_trl.config; bad = [m for m in ('rlce_trl.methods', 'rlce_trl.evidence.pipeline', "
            "'rlce_trl.methods') if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    # and the seam, the registry and every scorer stay free of torch, like the method core
    code = "import sys, rlce_trl.methods; sys.exit('torch' in sys.modules or 'trl' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0


def test_reward_method_kwargs_from_the_command_line(tmp_path):
    from transformers import HfArgumentParser

    (args,) = HfArgumentParser(RLCEGRPOConfig).parse_args_into_dataclasses(
        ["--output_dir", str(tmp_path), "--bf16", "False", "--use_cpu", "True", "--per_device_train_batch_size", "8",
         "--reward_method", "rler", "--reward_method_kwargs", '{"max_active": 3}'])
    assert args.reward_method_kwargs == {"max_active": 3}
    scorer = build_scorer(args.reward_method, None, args.evidence_settings(), **args.reward_method_kwargs)
    assert scorer.max_active == 3


@pytest.mark.parametrize(
    "overrides, fix",
    [
        (dict(reward_method_kwargs="{max_active: 3}"), "not valid JSON"),
        (dict(reward_method_kwargs="[1, 2]"), "must be a JSON object"),
        (dict(reward_method="grpo"), "or your own scorer as 'package.module:Class'"),
        (dict(reward_method="rlce_static", rlce_mode="pointwise"), "set reward_method='rlce' and rlce_mode='static'"),
    ],
)
def test_bad_method_settings_name_the_fix(tmp_path, overrides, fix):
    with pytest.raises(ValueError, match=fix):
        RLCEGRPOConfig(output_dir=str(tmp_path), **CPU, **overrides)


def test_one_knob_for_the_ablation(tmp_path):
    args = RLCEGRPOConfig(output_dir=str(tmp_path), **CPU, reward_method="rlce_static")
    assert (args.reward_method, args.rlce_mode) == ("rlce", "static")
    assert args.evidence_settings().mode == "static"
    args = RLCEGRPOConfig(output_dir=str(tmp_path), **CPU, reward_method="user_scorer:ShortestWins")
    assert args.reward_method == "user_scorer:ShortestWins"  # a dotted path is checked for its form only


def test_a_scorer_with_score_only_gets_the_no_op_methods():
    scorer = as_group_scorer(ShortestWins(None))
    assert isinstance(scorer, GroupScorer) and scorer.name == "shortest"
    (result,), stats = scorer.score([Group("c", ["long answer", "short"])])
    assert result.verified == [0.0, 1.0] and stats.metrics()["user_metric"] == 7.0
    assert scorer.pop_state_updates() == [] and scorer.state_dict() == {} and scorer.finalize_batch([], []) == []
    with pytest.raises(TypeError, match="derive it from rlce_trl.scoring.ScorerBase"):
        as_group_scorer(object())
    assert CenteredOnBatch.name == "centeredonbatch" and isinstance(CenteredOnBatch(), ScorerBase)


def test_step_stats_merge_keeps_the_method_class():
    from rlce_trl.evidence.pipeline import EvidenceStepStats

    parts = [EvidenceStepStats(groups=1), EvidenceStepStats(groups=2)]
    parts[0].extra["initial_ties"] += 1
    total = StepStats.merge(parts)
    assert type(total) is EvidenceStepStats and total.groups == 3 and total.metrics()["tie_rate"] == 0.0


def test_a_user_scorer_by_dotted_path_in_a_real_grpo_step(tiny_model_dir, tmp_path):
    from rlce_trl import RLCEGRPOTrainer

    args = tiny_grpo_args(tmp_path / "out", max_steps=1, reward_method="user_scorer:ShortestWins",
                          reward_method_kwargs='{"bonus": 2.0}')
    ShortestWins.built.clear()
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=Dataset.from_list(preference_rows(16)),
                              verifier=None)
    assert trainer.reward_func_names == ["shortest", "rlce_format"]
    (scorer,) = ShortestWins.built
    assert scorer.bonus == 2.0 and scorer.verifier is trainer.verifier
    trainer.train()
    assert scorer.calls == 1  # one scoring call for the whole step
    log = trainer.state.log_history[0]
    assert log["shortest/user_metric"] == 7.0 and "rewards/shortest/mean" in log


def test_group_scorer_argument_with_a_batch_hook(tiny_model_dir, tmp_path):
    from rlce_trl import RLCEGRPOTrainer

    scorer = CenteredOnBatch()
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=tiny_grpo_args(tmp_path / "out", max_steps=2),
                              train_dataset=Dataset.from_list(preference_rows(16)), group_scorer=scorer)
    assert trainer.group_scorer is scorer and trainer.reward_func_names == ["centeredonbatch", "rlce_format"]
    assert not hasattr(trainer.verifier, "model")  # no frozen model is loaded for a scorer that needs none
    trainer.train()
    assert scorer.batches == [4, 4]  # once per step, over every group of the step (16 completions / G=4)
    key = "rewards/centeredonbatch/mean"
    means = [entry[key] for entry in trainer.state.log_history if key in entry]
    assert len(means) == 2 and all(abs(m) < 1e-6 for m in means)  # centred on the whole batch


def test_a_scorer_that_drops_a_group_fails_with_the_fix(tiny_model_dir, tmp_path):
    from rlce_trl import RLCEGRPOTrainer

    class DropsOne(ScorerBase):
        def score(self, groups):
            return CenteredOnBatch().score(groups[1:])

    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=tiny_grpo_args(tmp_path / "out", max_steps=1),
                              train_dataset=Dataset.from_list(preference_rows(16)), group_scorer=DropsOne())
    with pytest.raises(RuntimeError, match="returned 3 results for 4 groups; a group scorer returns one GroupResult"):
        trainer.train()


def test_the_adapter_forwards_what_a_score_only_scorer_defines():
    inner = LabelMatch()
    scorer = as_group_scorer(inner)
    assert scorer is not inner and isinstance(scorer, GroupScorer)
    assert scorer.columns == ("pseudo_label",) and scorer.format_reward is length_format
    assert scorer.policy_rows is None and scorer.record_details(Group("c", ["a"])) is None  # the defaults

    class WithState:  # score and one state method only: the state method is its own, the others the defaults
        def score(self, groups):
            return [], StepStats()

        def state_dict(self):
            return {"seen": 3}

    adapted = as_group_scorer(WithState())
    assert adapted.state_dict() == {"seen": 3} and adapted.pop_state_updates() == [] and adapted.columns == ()


def test_a_score_only_scorer_brings_its_columns_and_format_term_to_training(tiny_model_dir, tmp_path):
    """`group_scorer=` with a scorer that defines `score`, `columns` and `format_reward` only: its groups carry the
    dataset column and its format term replaces RLCE's `\\boxed{}` one, in a real step."""
    from rlce_trl import RLCEGRPOTrainer

    rows = [{**row, "pseudo_label": f"label{i // 4}"} for i, row in enumerate(preference_rows(16))]
    inner = LabelMatch()
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=tiny_grpo_args(tmp_path / "out", max_steps=1),
                              train_dataset=Dataset.from_list(rows), group_scorer=inner)
    assert trainer.reward_func_names == ["labelmatch", "length_format"]
    trainer.train()
    assert len(inner.seen) == 4 and all(set(seen) == {"pseudo_label"} for seen in inner.seen)
    assert {seen["pseudo_label"] for seen in inner.seen} <= {f"label{i}" for i in range(4)}
    assert "rewards/length_format/mean" in trainer.state.log_history[0]
