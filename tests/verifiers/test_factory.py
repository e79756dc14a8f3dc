"""`VerifierFactory`: what the trainer's verifier and partner are, built in one place, and the one path by which the
group rewards reach TRL (`_GroupReward` reads the `rlce_group_reward` input column)."""

import pytest
from fakes import FakeOpenAIServer, ScriptedVerifier
from transformers import AutoModelForCausalLM

from rlce_trl.config import RLCEGRPOConfig
from rlce_trl.trainer import GROUP_REWARD_COLUMN, _GroupReward
from rlce_trl.verifiers.base import VerifierUnavailableError
from rlce_trl.verifiers.calibrated import CalibratedVerifier, VerdictCalibration
from rlce_trl.verifiers.factory import NoVerifier, VerifierFactory
from rlce_trl.verifiers.server import ServerVerifier


def config(tmp_path, **kw):
    return RLCEGRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, num_generations=2,
                          per_device_train_batch_size=2, report_to="none", **kw)


def test_own_scorer_without_verifier_gets_one_that_refuses_naming_the_fix(tmp_path):
    factory = VerifierFactory(config(tmp_path), "some/model", own_scorer=True)
    assert isinstance(factory.verifier, NoVerifier) and factory.initial_model is None
    with pytest.raises(RuntimeError, match="pass `verifier=` with your `group_scorer`"):
        factory.verifier._generate([])
    given = ScriptedVerifier(lambda r: "yes")
    assert VerifierFactory(config(tmp_path), "some/model", given, own_scorer=True).verifier is given


def test_a_given_verifier_is_kept_and_read_through_the_calibration(tmp_path):
    VerdictCalibration("p3", {"yes": 0.8, "no": 0.15, "unknown": 0.05}, 0.3, 50).save(tmp_path / "c.json")
    given = ScriptedVerifier(lambda r: "yes")
    plain, partner = VerifierFactory(config(tmp_path), "some/model", given).build(trainer=None)
    assert plain is given and partner is None
    args = config(tmp_path, rlce_verdict_calibration_file=str(tmp_path / "c.json"))
    wrapped, _ = VerifierFactory(args, "some/model", given).build(trainer=None)
    assert isinstance(wrapped, CalibratedVerifier) and wrapped.inner is given


def test_an_in_memory_model_without_a_checkpoint_is_copied_before_training(tiny_model_dir, tmp_path):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert VerifierFactory(config(tmp_path), model).initial_model is None  # it has a checkpoint: loaded from there
    model.config._name_or_path = ""
    copy = VerifierFactory(config(tmp_path), model).initial_model
    assert copy is not None and copy is not model
    assert VerifierFactory(config(tmp_path), model, peft_config=object()).initial_model is None  # the PEFT base


def test_server_verifier_and_partner_are_built_before_any_model_and_a_dead_partner_fails_at_once(tmp_path):
    server = FakeOpenAIServer().start()
    try:
        args = config(tmp_path, verifier_mode="server", verifier_server_base_url=server.base_url,
                      partner_mode="server", partner_server_base_url=server.base_url)
        factory = VerifierFactory(args, "some/model")
        assert isinstance(factory.verifier, ServerVerifier) and isinstance(factory.partner, ServerVerifier)
        assert factory.build(trainer=None) == (factory.verifier, factory.partner)
    finally:
        server.stop()
    dead = config(tmp_path, partner_mode="server", partner_server_base_url=server.base_url)
    with pytest.raises(VerifierUnavailableError, match="partner server .* does not answer"):
        VerifierFactory(dead, "some/model", ScriptedVerifier(lambda r: "yes"))


def test_group_rewards_reach_trl_through_the_input_column_only():
    reward = _GroupReward("rlce_verified")
    assert reward(["p", "p"], ["a", "b"], **{GROUP_REWARD_COLUMN: [1.0, None]}) == [1.0, None]
    assert reward(["p", "p"], ["a", "b"], **{GROUP_REWARD_COLUMN: [0.0, 1.0]}) == [0.0, 1.0]  # nothing kept
    with pytest.raises(RuntimeError, match="cannot be called on its own.*RLCEReward"):
        reward(["p", "p"], ["a", "b"])
