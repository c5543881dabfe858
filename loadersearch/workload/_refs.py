"""References to the parts of a user's pipeline: ``"module:qualname"`` strings that the
measuring process, a new Python process, imports.

- :func:`ref_of` turns what the Python API was given (a reference, a top-level function or
  class, a ``functools.partial`` of one) into a reference and its keyword arguments. It
  refuses, saying why and what to pass instead, what a new process cannot import: lambdas,
  functions defined inside functions, methods bound to objects, other objects, and anything
  defined in a notebook or an interactive session. A function defined in the script that was
  run (``python tune_mine.py``) is named by the script's module (``tune_mine:make_dataset``):
  the measuring process imports the script as a module, so its call to ``tune`` must sit
  under ``if __name__ == "__main__":``.
- :func:`resolve` imports a reference, with the working directory on the path as in the
  measuring process.
- :func:`child_environ` is the measuring process's environment: PYTHONPATH gets the working
  directory and the directories the referenced modules were imported from (so a module next
  to a script, or one a test imported from ``tests/``, is found there too).
- :func:`check_refs` imports every part of a pipeline given here, so that a wrong name fails
  before any measurement.

A function of the running script is named in :mod:`loadersearch.workload._script_refs`; a
pipeline read from a database is checked before any of it is imported in
:mod:`loadersearch.workload._stored_refs`.

Imports no torch.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.machinery
import importlib.util
import os
import site
import sys
import sysconfig
import types
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from loadersearch._options import check_ref
from loadersearch.errors import PipelineError
from loadersearch.workload._script_refs import NEW_PROCESS, main_module_name
from loadersearch.workload._spec import PipelineSpec

MEASURING_ENV = "LOADERSEARCH_MEASURING"  # set in the measuring process (and its workers)


@contextlib.contextmanager
def cwd_on_path() -> Iterator[None]:
    """The working directory on ``sys.path`` for the duration, as it is on the measuring
    process's PYTHONPATH (``loadersearch`` started as a console script does not have it)."""
    cwd = os.getcwd()
    if cwd in sys.path or "" in sys.path:
        yield
        return
    sys.path.append(cwd)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(cwd)


def _first_line(text: object) -> str:
    lines = [ln for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[0] if lines else "(no message)"


def resolve(ref: str, part: str = "part") -> Any:
    """The callable ``ref`` (``"module:qualname"``) names, imported; :class:`PipelineError`
    naming the part and the fix when it cannot be."""
    try:
        check_ref(ref, part)
    except ValueError as e:
        raise PipelineError(str(e)) from e
    module_name, qualname = ref.split(":")
    with cwd_on_path():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name is not None and (module_name + ".").startswith(e.name + "."):
                raise PipelineError(
                    f"cannot import the {part} {ref}: no module named {e.name!r} on the path. "
                    f"{NEW_PROCESS[0].upper()}{NEW_PROCESS[1:]} imports it: run from the "
                    "directory that holds it (the working directory is on the path) or add "
                    "that directory to PYTHONPATH."
                ) from e
            raise PipelineError(
                f"importing {module_name} (the {part} {ref}) failed: {e}; install what it "
                "imports in this environment."
            ) from e
        except Exception as e:
            raise PipelineError(
                f"importing {module_name} (the {part} {ref}) raised {type(e).__name__}: "
                f"{_first_line(e)}"
            ) from e
    obj: Any = module
    for name in qualname.split("."):
        try:
            obj = getattr(obj, name)
        except AttributeError as e:
            raise PipelineError(
                f"module {module_name} has no {qualname!r} (the {part} {ref}); check the name "
                "after the colon."
            ) from e
    if not callable(obj):
        raise PipelineError(
            f"the {part} {ref} is a {type(obj).__name__}, not a callable: name the function "
            "or class that builds it."
        )
    return obj


def bound(ref: str, kwargs: Mapping[str, Any], part: str) -> Any:
    """The callable of ``ref`` with ``kwargs`` bound (``functools.partial``) when there are any."""
    fn = resolve(ref, part)
    return functools.partial(fn, **kwargs) if kwargs else fn


def ref_of(obj: Any, part: str) -> tuple[str, dict[str, Any]]:
    """``(reference, keyword arguments)`` for ``obj``: a ``"module:qualname"`` string, a
    top-level function or class (or a classmethod), or a ``functools.partial`` of one with
    keyword arguments. Anything else is refused with :class:`PipelineError`."""
    if isinstance(obj, str):
        try:
            return check_ref(obj, part), {}
        except ValueError as e:
            raise PipelineError(str(e)) from e
    if isinstance(obj, functools.partial):
        if obj.args:
            raise PipelineError(
                f"the {part} is functools.partial({_name(obj.func)}, ...) with positional "
                "arguments: bind keyword arguments only (the study stores them by name)."
            )
        ref, kwargs = ref_of(obj.func, part)
        return ref, {**kwargs, **obj.keywords}
    top_level = (
        "define it with def (or class) at the top level of a module, or of your script, and "
        "pass it, or pass 'module:name'"
    )
    if isinstance(obj, types.MethodType) and not isinstance(obj.__self__, type):
        raise PipelineError(
            f"the {part} {_name(obj)} is a method bound to a {type(obj.__self__).__name__} "
            f"object, which {NEW_PROCESS} cannot rebuild: {top_level}."
        )
    if not isinstance(
        obj, (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType)
    ):
        cls = type(obj)
        raise PipelineError(
            f"the {part} is a {cls.__name__} object, which {NEW_PROCESS} cannot rebuild: pass "
            f"the function or class that builds it (e.g. {cls.__module__}:{cls.__qualname__}"
            f"), with its arguments in functools.partial or {part}_kwargs."
        )
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module or not qualname:
        raise PipelineError(f"the {part} {obj!r} has no importable name: {top_level}.")
    if "<lambda>" in qualname:
        raise PipelineError(
            f"the {part} is a lambda, which {NEW_PROCESS} cannot import by name: {top_level}."
        )
    if "<locals>" in qualname:
        raise PipelineError(
            f"the {part} {qualname.split('.')[-1]} is defined inside a function "
            f"({qualname}), so {NEW_PROCESS} cannot import it: {top_level} (bind the values "
            "it used from the enclosing function with functools.partial)."
        )
    if module == "__main__":
        ref = f"{main_module_name(obj, part, qualname)}:{qualname}"
    else:
        ref = f"{module}:{qualname}"
        try:
            found = resolve(ref, part)
        except PipelineError:
            found = None
        if not (found is obj or found == obj):
            raise PipelineError(
                f"the {part} {_name(obj)} is not what {ref} names once imported (a decorated or "
                "re-assigned name?): pass 'module:name' of the callable to use."
            )
    try:
        return check_ref(ref, part), {}
    except ValueError as e:
        raise PipelineError(f"{e} {top_level[0].upper()}{top_level[1:]}.") from e


def _name(obj: Any) -> str:
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)


def site_paths() -> set[str]:
    """The directories installed packages are imported from (site-packages), the base
    interpreter's too (a venv with system site packages)."""
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}
    paths = {
        scheme.get(key)
        for scheme in (sysconfig.get_paths(), sysconfig.get_paths(vars=base))
        for key in ("purelib", "platlib")
    }
    with contextlib.suppress(AttributeError):
        paths.update(site.getsitepackages())
    with contextlib.suppress(AttributeError):
        paths.add(site.getusersitepackages())
    return {os.path.abspath(p) for p in paths if p}


def stdlib_paths() -> set[str]:
    """The directories of Python's standard library (a venv's platstdlib holds its
    site-packages too: look there first)."""
    paths = {sysconfig.get_paths().get(key) for key in ("stdlib", "platstdlib")}
    return {os.path.abspath(p) for p in paths if p}


def _installed_paths() -> set[str]:
    """The interpreter's own import directories (every process has them already)."""
    return site_paths() | stdlib_paths()


def import_roots(modules: Iterable[str]) -> list[str]:
    """The directory each module's top-level package was imported from (``/x`` for
    ``mypkg.data`` in ``/x/mypkg/data.py``), leaving out the interpreter's own; modules that
    cannot be found are left to fail, with their message, where they are imported."""
    roots: list[str] = []
    installed = _installed_paths()
    for name in modules:
        with cwd_on_path():
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                continue
        if spec is None or not spec.has_location or not spec.origin:
            continue
        root = os.path.dirname(os.path.abspath(spec.origin))
        levels = name.count(".") + (1 if spec.submodule_search_locations is not None else 0)
        for _ in range(levels):
            root = os.path.dirname(root)
        if root not in roots and root not in installed:
            roots.append(root)
    return roots


def child_environ(
    pipeline: PipelineSpec, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The measuring process's environment for ``pipeline``: ``environ`` (default this
    process's) with the working directory and the import roots of the pipeline's modules
    appended to PYTHONPATH, and :data:`MEASURING_ENV` set."""
    env = dict(os.environ if environ is None else environ)
    entries = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    modules = [ref.split(":")[0] for ref in pipeline.refs().values()]
    for path in [os.getcwd(), *import_roots(modules)]:
        if path not in entries:
            entries.append(path)
    env["PYTHONPATH"] = os.pathsep.join(entries)
    env[MEASURING_ENV] = "1"
    return env


def check_refs(pipeline: PipelineSpec) -> None:
    """Import every part of ``pipeline`` here, so that a wrong name or a missing module fails
    before any measurement. The running script itself is left out: importing it here would
    run its top level a second time (the measuring process imports it)."""
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    main_file = os.path.abspath(main_file) if main_file else None
    for part, ref in pipeline.refs().items():
        module = ref.split(":")[0]
        _refuse_stdlib(part, ref, module)
        if main_file and module not in sys.modules and _origin(module) == main_file:
            continue
        obj = resolve(ref, part)
        _refuse_stdlib(part, ref, getattr(obj, "__module__", None) or "")


def _refuse_stdlib(part: str, ref: str, module: str) -> None:
    """A standard-library or builtin callable is never a pipeline part (``os:system`` as a
    dataset runs a command): the rule a stored pipeline follows
    (:func:`~loadersearch.workload._stored_refs.admit_stored`) holds for one given directly
    too, so that no study stores what no worker would import."""
    if module and is_stdlib_name(module):
        raise PipelineError(
            f"the {part} {ref} is {module}'s, from Python's standard library: a pipeline part "
            f"must be a function or class of your own (or a package's) that builds the {part}; "
            "the standard library is never imported as one."
        )


def _origin(module: str) -> str | None:
    with cwd_on_path():
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            return None
    return os.path.abspath(spec.origin) if spec is not None and spec.origin else None


def is_stdlib_name(module: str) -> bool:
    top = module.split(".")[0]
    return top in sys.stdlib_module_names or top in sys.builtin_module_names
