"""`RLCEGRPOTrainer`'s docstring `Example:` runs as written, on CPU: its code is taken from the docstring and executed
with the Hub model id replaced by the tiny local model and `RLCEGRPOConfig` given the tiny-model budgets (one step,
short rollouts and verifier replies; `tiny_grpo_args`), so a change to the trainer's signature breaks this test."""

import re

from testing_utils import tiny_grpo_args

import rlce_trl
from rlce_trl import RLCEGRPOTrainer


def example_code() -> str:
    doc = RLCEGRPOTrainer.__doc__
    assert "Args:" in doc and "Example:" in doc
    (block,) = re.findall(r"```python\n(.*?)```", doc, flags=re.S)
    lines = [line.strip() for line in block.splitlines()]
    return "\n".join(line[4:] for line in lines if line.startswith((">>> ", "... ")))


def test_the_docstring_example_trains(tiny_model_dir, tmp_path, monkeypatch):
    code = example_code()
    assert "HuggingFaceTB/SmolLM2-135M-Instruct" in code and "trainer.train()" in code
    monkeypatch.chdir(tmp_path)
    real = rlce_trl.RLCEGRPOConfig

    def tiny_config(output_dir, **kwargs):
        with monkeypatch.context() as patch:  # tiny_grpo_args builds the real config
            patch.setattr(rlce_trl, "RLCEGRPOConfig", real)
            return tiny_grpo_args(output_dir, max_steps=1, **kwargs)

    monkeypatch.setattr(rlce_trl, "RLCEGRPOConfig", tiny_config)
    namespace = {}
    exec(code.replace("HuggingFaceTB/SmolLM2-135M-Instruct", str(tiny_model_dir)), namespace)  # noqa: S102
    trainer = namespace["trainer"]
    assert trainer.state.global_step == 1 and trainer.args.output_dir == "SmolLM2-135M-RLCE"
    logged = {key for entry in trainer.state.log_history for key in entry}
    assert {"rewards/rlce_format/mean", "rlce/unscored_fraction"} <= logged
