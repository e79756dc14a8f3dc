"""One table of offline model aliases (`rlce_trl.models.MODEL_ALIASES`), honoured alike by `RLCEGRPOTrainer(model=)`,
the config's verifier model and the commands. The table's real entry converts SmolLM2 (tests/slow/test_smollm2.py);
here an entry naming the tiny test model shows that every route goes through the table."""

import pytest
from datasets import Dataset
from testing_utils import preference_rows, tiny_grpo_args

from rlce_trl import RLCEGRPOTrainer, models
from rlce_trl.cli import main


@pytest.fixture
def tiny_alias(monkeypatch, tiny_model_dir):
    monkeypatch.setitem(models.MODEL_ALIASES, "tiny-offline", lambda: tiny_model_dir)
    return "tiny-offline"


def test_the_trainer_resolves_the_policy_and_verifier_aliases(tiny_alias, tiny_model_dir, tmp_path):
    args = tiny_grpo_args(tmp_path / "out", verifier_model_name_or_path=tiny_alias)
    trainer = RLCEGRPOTrainer(model=tiny_alias, args=args, train_dataset=Dataset.from_list(preference_rows(4)))
    assert trainer.model.config._name_or_path == tiny_model_dir
    assert trainer.args.verifier_model_name_or_path == tiny_model_dir


def test_evaluate_accepts_an_alias(tiny_alias, tmp_path, capsys):
    out = tmp_path / "eval"
    assert main(["evaluate", "--model_name_or_path", tiny_alias, "--data", "sample", "--limit", "1",
                 "--max_new_tokens", "2", "--dtype", "float32", "--output_dir", str(out)]) == 0
    assert (out / "predictions.jsonl").read_text().count("\n") == 1


def test_the_commands_name_the_aliases_of_the_table(capsys):
    for command in ("evaluate", "sample"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "smollm2-135m-instruct" in " ".join(capsys.readouterr().out.split()), command
