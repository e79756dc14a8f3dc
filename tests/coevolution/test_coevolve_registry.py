"""The co-evolution registry: a plain dict of method classes whose phases name their scorers by reward-method names
of the one reward registry (`rlce_trl.methods.REWARD_METHODS`)."""

import pytest

from rlce_trl.coevolution.base import CoevolutionMethod
from rlce_trl.coevolution.registry import METHODS, get_method
from rlce_trl.errors import InputError
from rlce_trl.methods import REWARD_METHODS


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_phase_scorer_is_a_registered_reward_method(name):
    method = get_method(name)
    assert isinstance(method, METHODS[name]) and isinstance(method, CoevolutionMethod)
    phases = method.phases(0)
    assert [p.role for p in phases] == list(method.roles)
    for phase in phases:
        assert phase.reward_method in REWARD_METHODS, (name, phase.reward_method)


def test_unknown_method_names_the_choices():
    with pytest.raises(InputError, match="use one of rlac, visplay, video_zero"):
        get_method("rlax")
