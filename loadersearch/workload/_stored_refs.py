"""A pipeline read from a database (a study's stored references) checked before any of it is
imported: :func:`locate_stored` finds where each reference resolves on this machine without
importing anything, :func:`admit_stored` refuses what :class:`PipelineTrust` does not allow
(only modules under the working directory or a ``--pipeline-path`` directory, installed ones
with ``--trust-pipeline``, never the standard library's), then imports and checks the rest.

Imports no torch.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from loadersearch.errors import PipelineError
from loadersearch.workload._refs import (
    cwd_on_path,
    is_stdlib_name,
    resolve,
    site_paths,
    stdlib_paths,
)
from loadersearch.workload._spec import PipelineSpec

_logger = logging.getLogger(__name__)

# A pipeline read from a database: a study's stored references are data someone else may have
# written (a database sent to you, one an attacker can write to), so a worker imports them only
# when they name the user's own code: module files under the working directory or a directory
# the user names. Installed packages need --trust-pipeline; the standard library and builtins
# are never a pipeline part (os:system, subprocess:run, builtins:exec would run anything).

STDLIB = "stdlib"  # the standard library or a builtin module: never imported from a database
INSTALLED = "installed"  # an installed package (site-packages, loadersearch itself)
TRUSTED = "trusted"  # under the working directory or a --pipeline-path directory
ELSEWHERE = "elsewhere"  # found on the path, outside those directories
MISSING = "missing"  # not found on this machine's path
# PyTorch's own loss classes as the loss (``torch.nn:CrossEntropyLoss``, the README's example):
# installed, but what they do with JSON arguments is build a loss, so no flag is needed.
TORCH_LOSS = "torch-loss"


@dataclass(frozen=True)
class PipelineTrust:
    """Which references read from a database may be imported: modules under the working
    directory or one of ``paths`` (``--pipeline-path``), and with ``everything``
    (``--trust-pipeline``) any module but the standard library's."""

    paths: tuple[str, ...] = ()
    everything: bool = False

    def dirs(self) -> list[str]:
        return [os.path.realpath(p) for p in (os.getcwd(), *self.paths)]

    def add_to_path(self) -> None:
        """Put the ``--pipeline-path`` directories on this process's path, so that the check,
        and the measuring process (whose PYTHONPATH gets the roots of the modules found),
        import the modules from there."""
        for path in self.paths:
            path = os.path.abspath(path)
            if path not in sys.path:
                sys.path.append(path)


@dataclass(frozen=True)
class StoredRef:
    """One reference of a stored pipeline, and where it resolves on this machine (found
    without importing anything)."""

    part: str
    ref: str
    kwargs: dict[str, Any]
    where: str | None  # the module's file (a namespace package's directory), None: not found
    kind: str  # STDLIB, INSTALLED, TRUSTED, ELSEWHERE, MISSING or TORCH_LOSS

    def call(self) -> str:
        """``module:callable(key=value, ...)``: what the measuring process calls."""
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"{self.ref}({args})"

    def line(self) -> str:
        where = {
            STDLIB: "the standard library",
            MISSING: "no module on this machine's path",
        }.get(self.kind, self.where or "?")
        return f"{self.part} {self.call()} from {where}"


def locate_stored(pipeline: PipelineSpec, trust: PipelineTrust) -> list[StoredRef]:
    """Where each reference of ``pipeline`` resolves, importing nothing (the top-level
    package's spec, then the module's file searched in the package's directories)."""
    out = []
    for part, ref in pipeline.refs().items():
        module = ref.split(":")[0]
        places = _places(module)
        kinds = [_kind(module, place, trust) for place in places] or [MISSING]
        if is_stdlib_name(module):
            kinds.append(STDLIB)
        # the worst place decides: the package's __init__ runs as well as the module
        order = (STDLIB, MISSING, ELSEWHERE, INSTALLED, TRUSTED)
        kind = min(kinds, key=order.index)
        if part == "loss" and kind == INSTALLED and (module + ".").startswith("torch.nn."):
            kind = TORCH_LOSS  # checked to be one once imported (admit_stored)
        where = places[-1] if places else None
        out.append(StoredRef(part, ref, getattr(pipeline, f"{part}_kwargs"), where, kind))
    return out


def admit_stored(
    pipeline: PipelineSpec,
    trust: PipelineTrust,
    source: str,
    show: Callable[[str], None] | None = None,
) -> list[StoredRef]:
    """Check a pipeline read from a database (``source`` names it) before anything of it is
    imported: :class:`PipelineError` naming the first reference refused, where it resolves and
    the fix. Accepted, its references are shown (``show``, else logged), then imported here and
    each callable checked to be defined where its module is (``mine:os.system`` names the
    standard library's function through the user's module)."""
    trust.add_to_path()
    stored = locate_stored(pipeline, trust)
    for s in stored:
        if any(name.startswith("__") for name in s.ref.split(":")[1].split(".")):
            raise PipelineError(
                f"refusing {_what(s, source)}: it reaches a private attribute (a name starting "
                "with __); a pipeline part is a function or class named as module:name."
            )
        _refuse(s, trust, source, s.where or "")
    say = show or (lambda text: _logger.info("%s", text))
    verb = "trusted (--trust-pipeline)" if trust.everything else "imported"
    say(f"The study's pipeline, from {source}, {verb}:")
    for s in stored:
        say(f"  {s.line()}")
    for s in stored:
        obj = resolve(s.ref, s.part)
        target = getattr(obj, "__func__", obj)  # a classmethod: its function
        name = getattr(target, "__module__", None)
        path = getattr(sys.modules.get(name), "__file__", None) if isinstance(name, str) else None
        if not isinstance(name, str) or (path is None and not is_stdlib_name(name)):
            raise PipelineError(
                f"refusing {_what(s, source)}: it names a {type(obj).__name__} whose defining "
                "module file cannot be told; a pipeline part is a function or class defined in "
                "your module."
            )
        kind = STDLIB if is_stdlib_name(name) else _kind(name, path, trust)
        if s.kind == TORCH_LOSS and _is_torch_loss(obj):
            kind = TORCH_LOSS
        defined = StoredRef(s.part, s.ref, s.kwargs, path, kind)
        _refuse(defined, trust, source, f"{path or 'built in'}: {name} defines it")
    return stored


def _what(s: StoredRef, source: str) -> str:
    return f"the study's {s.part} {s.call()} from {source}"


def _refuse(s: StoredRef, trust: PipelineTrust, source: str, where: str) -> None:
    """Raise unless ``s`` may be imported under ``trust``; ``where``: where it resolves."""
    what = _what(s, source)
    if s.kind == STDLIB:
        raise PipelineError(
            f"refusing {what}: it resolves to the standard library ({where or 'built in'}), "
            "which is never a pipeline part (it would run whatever the database says), not "
            "even with --trust-pipeline: this study's pipeline is not yours; start your own "
            "with `loadersearch run`."
        )
    if s.kind in (TRUSTED, TORCH_LOSS) or (trust.everything and s.kind in (INSTALLED, ELSEWHERE)):
        return
    if s.kind == MISSING:
        raise PipelineError(
            f"{what} resolves to no module on this machine's path: run from the directory "
            "that holds it, or name that directory with --pipeline-path DIR."
        )
    kind = "an installed package" if s.kind == INSTALLED else "a module"
    raise PipelineError(
        f"refusing {what}: it resolves to {kind} ({where}) outside "
        f"{' and '.join(trust.dirs())}, and a pipeline read from a database is imported only "
        "from the working directory or a --pipeline-path directory; run from the directory "
        "that holds it, add --pipeline-path DIR, or pass --trust-pipeline if you trust "
        "whoever can write to this database."
    )


def _is_torch_loss(obj: Any) -> bool:
    """Whether ``obj`` is one of PyTorch's loss classes (a subclass of torch.nn's ``_Loss``
    defined in torch.nn.modules.loss)."""
    losses = sys.modules.get("torch.nn.modules.loss")
    base = getattr(losses, "_Loss", None)
    return (
        isinstance(obj, type)
        and base is not None
        and issubclass(obj, base)
        and obj.__module__ == "torch.nn.modules.loss"
    )


def _places(module: str) -> list[str]:
    """The files (a namespace package's directories) that importing ``module`` runs, found
    without running any: the top-level package's, then the module's own, searched in the
    package's directories."""
    parts = module.split(".")
    with cwd_on_path():
        try:
            spec = importlib.util.find_spec(parts[0])
        except (ImportError, ValueError):
            return []
    if spec is None:
        return []
    places = [_place(spec)]
    for i in range(1, len(parts)):
        locations = list(spec.submodule_search_locations or [])
        found = importlib.machinery.PathFinder.find_spec(".".join(parts[: i + 1]), locations)
        if not locations or found is None:
            break  # the package builds its modules itself: its own place decides
        spec = found
        places.append(_place(spec))
    return places


def _place(spec: importlib.machinery.ModuleSpec) -> str:
    if spec.origin in (None, "namespace") and spec.submodule_search_locations:
        return os.pathsep.join(spec.submodule_search_locations)
    return spec.origin or "?"


def _kind(module: str, place: str | None, trust: PipelineTrust) -> str:
    if place is None or place in ("built-in", "frozen"):
        return STDLIB if place else MISSING
    paths = [os.path.realpath(p) for p in place.split(os.pathsep)]
    given = [os.path.realpath(p) for p in trust.paths]
    if all(_under(p, given) for p in paths):
        return TRUSTED  # named by the user, even where packages are installed
    if module.split(".")[0] == "loadersearch" or any(_under(p, site_paths()) for p in paths):
        return INSTALLED  # the tool's own modules are not a pipeline the user wrote
    if any(_under(p, stdlib_paths()) for p in paths):
        return STDLIB
    return TRUSTED if all(_under(p, trust.dirs()) for p in paths) else ELSEWHERE


def _under(path: str, dirs: Iterable[str]) -> bool:
    for d in dirs:
        d = os.path.realpath(d)
        with contextlib.suppress(ValueError):
            if os.path.commonpath([path, d]) == d:
                return True
    return False
