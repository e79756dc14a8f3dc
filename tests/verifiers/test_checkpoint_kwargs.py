"""The `model_init_kwargs` that decide which weights and code load (`trust_remote_code`, `attn_implementation`,
`revision`, ...) reach every checkpoint the trainer loads besides the policy: the verifier's frozen copy, a named
verifier and the co-evolution partner, model and tokenizer alike (TRL's `test_trust_remote_code`, with
RLCEGRPOTrainer). `dtype` and placement stay the verifier's own."""

import json
from pathlib import Path

import pytest
from datasets import Dataset
from fakes import ScriptedVerifier
from testing_utils import build_tiny_model, preference_rows, tiny_grpo_args

from rlce_trl import RLCEGRPOTrainer
from rlce_trl.verifiers.factory import checkpoint_kwargs
from rlce_trl.verifiers.from_config import vllm_checkpoint_args

REMOTE_CONFIG = '''from transformers import LlamaConfig


class RemoteLlamaConfig(LlamaConfig):
    model_type = "rlce_remote_llama"
'''
REMOTE_MODELING = '''from transformers import LlamaForCausalLM

from .configuration_remote import RemoteLlamaConfig


class RemoteLlamaForCausalLM(LlamaForCausalLM):
    config_class = RemoteLlamaConfig
'''


def build_remote_code_model(path: Path) -> str:
    """A tiny Llama saved as a custom-code checkpoint (`auto_map` to modules beside it, a model type transformers
    does not know): loading it needs `trust_remote_code=True`, like TRL's tiny-RemoteForCausalLM."""
    build_tiny_model(path)
    config = json.loads((path / "config.json").read_text())
    config.update(model_type="rlce_remote_llama", architectures=["RemoteLlamaForCausalLM"], auto_map={
        "AutoConfig": "configuration_remote.RemoteLlamaConfig",
        "AutoModelForCausalLM": "modeling_remote.RemoteLlamaForCausalLM",
    })
    (path / "config.json").write_text(json.dumps(config))
    (path / "configuration_remote.py").write_text(REMOTE_CONFIG)
    (path / "modeling_remote.py").write_text(REMOTE_MODELING)
    return str(path)


@pytest.fixture(scope="module")
def remote_model(tmp_path_factory) -> str:
    return build_remote_code_model(tmp_path_factory.mktemp("remote") / "model")


def make_trainer(model, tmp_path, **overrides):
    return RLCEGRPOTrainer(model=model, args=tiny_grpo_args(tmp_path / "out", **overrides),
                           train_dataset=Dataset.from_list(preference_rows(4)))


def test_custom_code_needs_trust_remote_code_and_the_verifier_gets_it(remote_model, tmp_path):
    with pytest.raises(ValueError, match="custom code"):
        make_trainer(remote_model, tmp_path)
    for settings in (dict(trust_remote_code=True), dict(model_init_kwargs={"trust_remote_code": True})):
        trainer = make_trainer(remote_model, tmp_path, **settings)
        assert type(trainer.model).__name__ == "RemoteLlamaForCausalLM"
        verifier = trainer.verifier.model  # the frozen copy of the initial checkpoint, loaded with the same code
        assert type(verifier).__name__ == "RemoteLlamaForCausalLM" and verifier is not trainer.model
        assert not any(p.requires_grad for p in verifier.parameters())


def test_attn_implementation_reaches_the_verifier_and_the_partner_but_dtype_stays_the_verifiers(tmp_path):
    policy = build_tiny_model(tmp_path / "policy")
    partner = build_tiny_model(tmp_path / "partner", seed=1)
    kwargs = {"attn_implementation": "eager", "dtype": "float32"}
    trainer = make_trainer(policy, tmp_path, model_init_kwargs=kwargs, partner_model_name_or_path=partner)
    assert trainer.model.config._attn_implementation == "eager"
    for frozen in (trainer.verifier, trainer.partner):
        assert frozen.model.config._attn_implementation == "eager"
    named = make_trainer(policy, tmp_path, model_init_kwargs=kwargs, verifier_model_name_or_path=partner)
    assert named.verifier.model.config._attn_implementation == "eager"


def test_checkpoint_kwargs_keep_identity_drop_placement_and_keep_repo_pointers_for_the_policys_checkpoint(tmp_path):
    args = tiny_grpo_args(tmp_path, trust_remote_code=True, model_init_kwargs={
        "dtype": "bfloat16", "device_map": "auto", "revision": "abc123", "subfolder": "sft",
        "attn_implementation": "eager", "token": "hf_secret"})
    own = checkpoint_kwargs(args, policy_checkpoint=True, quantization_config="q")
    assert own == {"revision": "abc123", "subfolder": "sft", "attn_implementation": "eager", "token": "hf_secret",
                   "trust_remote_code": True, "quantization_config": "q"}
    other = checkpoint_kwargs(args, policy_checkpoint=False)  # a separately named checkpoint: no policy revision
    assert other == {"attn_implementation": "eager", "token": "hf_secret", "trust_remote_code": True}
    assert vllm_checkpoint_args(own) == ["--trust-remote-code", "--revision", "abc123", "--tokenizer-revision",
                                         "abc123"]
    assert vllm_checkpoint_args({"trust_remote_code": False}) == []


def test_the_tokenizer_load_takes_the_code_and_revision_settings(remote_model, monkeypatch):
    from transformers import AutoTokenizer

    from rlce_trl.generation import hf

    seen = {}
    real = AutoTokenizer.from_pretrained

    def spy(path, **kwargs):
        seen.update(kwargs)
        return real(path, **kwargs)

    monkeypatch.setattr(AutoTokenizer, "from_pretrained", spy)
    # a local folder has no revisions: transformers reads it as it is
    hf.load_frozen_model(remote_model, dtype="float32", trust_remote_code=True, revision="main",
                         attn_implementation="eager")
    assert seen["trust_remote_code"] is True and seen["revision"] == "main" and "attn_implementation" not in seen


def test_a_given_verifier_is_not_reloaded(remote_model, tmp_path):
    given = ScriptedVerifier(lambda r: "yes")
    trainer = RLCEGRPOTrainer(model=remote_model, args=tiny_grpo_args(tmp_path / "out", trust_remote_code=True),
                              train_dataset=Dataset.from_list(preference_rows(4)), verifier=given)
    assert trainer.verifier is given
