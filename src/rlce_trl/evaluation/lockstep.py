"""Evaluation callbacks under ZeRO-3 (or FSDP) with several processes: the main process evaluates, every process
generates.

With sharded parameters each forward of the policy is a collective: a `generate` on the main process alone waits
forever for the others. [`run_on_main`] runs an evaluation (a validation, a test-time adaptation pass) on the main
process, which alone generates from its prompts, judges, writes files and returns the score, while every other process
repeats each of its `model.generate` calls with the same inputs (broadcast from the main process); transformers then
generates with `synced_gpus=True` and the collectives line up. An error on the main process is raised on every process,
so none is left waiting. Without sharding, or with one process, the evaluation runs on the main process alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")


def _world() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def generation_is_collective(model) -> bool:
    """Whether `model.generate` is a collective here: ZeRO-3 or FSDP with several processes (transformers' own
    condition for `synced_gpus`)."""
    if _world()[1] < 2:
        return False
    from transformers.integrations.deepspeed import is_deepspeed_zero3_enabled
    from transformers.integrations.fsdp import is_fsdp_managed_module

    return is_deepspeed_zero3_enabled() or is_fsdp_managed_module(model)


def _moved(value, device):
    """`value` with every tensor inside (dicts, lists, tuples, `BatchEncoding`s) moved to `device`."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, Mapping):
        return {k: _moved(v, device) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_moved(v, device) for v in value)
    return value


def _broadcast(message=None):
    import torch.distributed as dist

    box = [message]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def run_on_main(model, evaluate: Callable[[], T]) -> T | None:
    """`evaluate()` on the main process (its result there, `None` on the others). When `model.generate` is a collective
    ([`generation_is_collective`]), every other process makes the same `model.generate` calls meanwhile."""
    rank, _ = _world()
    if not generation_is_collective(model):
        return evaluate() if rank == 0 else None
    if rank != 0:
        return _follow(model)
    original = model.__dict__.get("generate")

    def generate(*args, **kwargs):
        _broadcast(("generate", _moved(args, "cpu"), _moved(kwargs, "cpu")))
        return type(model).generate(model, *args, **kwargs) if original is None else original(*args, **kwargs)

    model.generate = generate
    try:
        result = evaluate()
    except BaseException as error:
        _broadcast(("failed", f"{type(error).__name__}: {error}", None))
        raise
    finally:
        if original is None:
            del model.generate
        else:
            model.generate = original
    _broadcast(("done", None, None))
    return result


def _follow(model) -> None:
    """Repeat the main process's `model.generate` calls until it has finished evaluating."""
    from ..generation.hf import evaluating

    device = next(model.parameters()).device
    with evaluating(model):
        while True:
            kind, args, kwargs = _broadcast()
            if kind == "generate":
                model.generate(*_moved(args, device), **_moved(kwargs, device))
            elif kind == "failed":
                raise RuntimeError(f"The main process failed while evaluating ({args}); see its log.")
            else:
                return None
