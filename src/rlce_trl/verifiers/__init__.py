"""Verifier backends behind one interface (`base.Verifier`). Backends import their heavy dependencies lazily."""

from .base import Reply, Request, Sampling, Verifier, VerifierStats, VerifierUnavailableError

__all__ = [
    "Reply", "Request", "Sampling", "Verifier", "VerifierStats", "VerifierUnavailableError", "TransformersVerifier",
    "load_frozen_model",
]


def __getattr__(name):
    if name in ("TransformersVerifier", "load_frozen_model"):
        from . import transformers_backend

        return getattr(transformers_backend, name)
    raise AttributeError(name)
