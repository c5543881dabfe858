"""loadersearch where people train: one module per framework, each importing its framework
only when used, so ``import loadersearch`` never pulls in Ultralytics, Lightning or
transformers.

- :mod:`loadersearch.integrations.ultralytics`: tune an Ultralytics YOLO training pipeline and
  answer in its own terms (``model.train(..., workers=, batch=, cache=)``).
- :mod:`loadersearch.integrations.lightning`: ``DataLoaderTuner``, a Lightning callback that
  tunes the train DataLoader in the first epoch (AutoLoader) or applies a study's winner.
- :mod:`loadersearch.integrations.huggingface`: ``DataLoaderTuner``, a ``TrainerCallback``
  that does the same and fills the ``TrainingArguments`` ``dataloader_*`` fields, and
  ``dataloader_arguments``, those fields from a stored study.

A framework that is not installed gives one line naming the extra to install
(:func:`require`).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from loadersearch.errors import LoaderSearchError

__all__ = ["FrameworkMissingError", "require"]


class FrameworkMissingError(LoaderSearchError, ImportError):
    """The framework an integration plugs into is not installed."""


def require(module: str, extra: str) -> ModuleType:
    """``module`` imported, or a :class:`FrameworkMissingError` whose message is the one line
    that fixes it: ``pip install 'loadersearch[EXTRA]'``."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is not None and e.name.split(".")[0] != module.split(".")[0]:
            raise  # the framework is there but one of its own dependencies is not
        raise FrameworkMissingError(
            f"{module} is not installed: pip install 'loadersearch[{extra}]'"
        ) from e
