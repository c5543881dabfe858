"""Names a package exports but imports on first use: the ones whose modules import torch,
numpy or optuna, so that importing the package (the CLI does, for ``--help``) stays light.

A package lists them as ``_LAZY = {"name": "_module", ...}`` and defines
``def __getattr__(name): return lazy_attribute(__name__, _LAZY, name)`` (PEP 562); ``from
package import name`` then works as for any other export. The import-graph test reads
``_LAZY`` as imports, so a lazy name hides no cycle.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

__all__ = ["lazy_attribute"]


def lazy_attribute(package: str, table: dict[str, str], name: str) -> Any:
    """``name`` of ``package``, imported from its module in ``table`` and kept on the package
    (the next lookup is a plain attribute); an AttributeError for a name not in it."""
    module = table.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{package}.{module}"), name)
    setattr(sys.modules[package], name, value)
    return value
