"""Deprecation aliases for module paths that moved in 0.2 (each kept for one release)."""

from __future__ import annotations

import importlib
import warnings


def alias(old: str, new: str, namespace: dict) -> None:
    """Make module `old` an alias of `new`: its public names are `new`'s, and importing it warns once, naming the
    new path."""
    warnings.warn(f"`{old}` moved to `{new}`; the old path will be removed in the next release.", FutureWarning,
                  stacklevel=3)
    module = importlib.import_module(new)
    names = getattr(module, "__all__", [n for n in vars(module) if not n.startswith("_")])
    namespace.update({name: getattr(module, name) for name in names})
    namespace["__all__"] = list(names)
