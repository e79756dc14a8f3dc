"""`activation_checkpointing` (the recipes' key) works on every supported transformers: on 5.25 it is
TrainingArguments' own field; on the transformers vLLM 0.31 pins (5.17, only `gradient_checkpointing`) the config adds
it and hands its value on. This file runs in both environments (`make test` and `make test-vllm-env`)."""

import warnings

import pytest
import transformers

from rlce_trl.checkpointing_compat import HAS_ACTIVATION_CHECKPOINTING
from rlce_trl.config import RLCEGRPOConfig


@pytest.mark.parametrize("value", [False, True])
def test_activation_checkpointing_switches_checkpointing(tmp_path, value):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # no deprecated name on either transformers
        args = RLCEGRPOConfig(output_dir=str(tmp_path), bf16=False, use_cpu=True, activation_checkpointing=value,
                              activation_checkpointing_kwargs={"use_reentrant": False})
    assert args.activation_checkpointing is value and args.gradient_checkpointing is value
    assert args.gradient_checkpointing_kwargs == {"use_reentrant": False}


@pytest.mark.filterwarnings("ignore::FutureWarning")  # the old name, on purpose
def test_unset_keeps_trl_default(tmp_path):
    args = RLCEGRPOConfig(output_dir=str(tmp_path), bf16=False, use_cpu=True, gradient_checkpointing=False)
    assert args.gradient_checkpointing is False and args.activation_checkpointing is False


def test_the_installed_transformers_is_detected():
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    if (major, minor) >= (5, 25):
        assert HAS_ACTIVATION_CHECKPOINTING
    if (major, minor) <= (5, 20):
        assert not HAS_ACTIVATION_CHECKPOINTING
