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
- :func:`admit_stored` checks a pipeline read from a database before any of it is imported
  (a database holds data, not code): only modules under the working directory or a
  ``--pipeline-path`` directory, installed ones with ``--trust-pipeline``, never the standard
  library's.

Imports no torch.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.machinery
import importlib.util
import keyword
import logging
import os
import site
import sys
import sysconfig
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from loadersearch._options import check_ref
from loadersearch.errors import PipelineError
from loadersearch.workload._spec import PipelineSpec

_logger = logging.getLogger(__name__)

MEASURING_ENV = "LOADERSEARCH_MEASURING"  # set in the measuring process (and its workers)

_NEW_PROCESS = "the measuring process (a new Python process)"


@contextlib.contextmanager
def _cwd_on_path() -> Iterator[None]:
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
    with _cwd_on_path():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name is not None and (module_name + ".").startswith(e.name + "."):
                raise PipelineError(
                    f"cannot import the {part} {ref}: no module named {e.name!r} on the path. "
                    f"{_NEW_PROCESS[0].upper()}{_NEW_PROCESS[1:]} imports it: run from the "
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
            f"object, which {_NEW_PROCESS} cannot rebuild: {top_level}."
        )
    if not isinstance(
        obj, (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType)
    ):
        cls = type(obj)
        raise PipelineError(
            f"the {part} is a {cls.__name__} object, which {_NEW_PROCESS} cannot rebuild: pass "
            f"the function or class that builds it (e.g. {cls.__module__}:{cls.__qualname__}"
            f"), with its arguments in functools.partial or {part}_kwargs."
        )
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module or not qualname:
        raise PipelineError(f"the {part} {obj!r} has no importable name: {top_level}.")
    if "<lambda>" in qualname:
        raise PipelineError(
            f"the {part} is a lambda, which {_NEW_PROCESS} cannot import by name: {top_level}."
        )
    if "<locals>" in qualname:
        raise PipelineError(
            f"the {part} {qualname.split('.')[-1]} is defined inside a function "
            f"({qualname}), so {_NEW_PROCESS} cannot import it: {top_level} (bind the values "
            "it used from the enclosing function with functools.partial)."
        )
    if module == "__main__":
        ref = f"{_main_module_name(obj, part, qualname)}:{qualname}"
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


def _main_module_name(obj: Any, part: str, qualname: str) -> str:
    """The module name under which the measuring process imports ``__main__``: the module of
    ``python -m pkg.mod``, the file name of ``python script.py``; a notebook or an
    interactive session has none."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    path = getattr(main, "__file__", None)
    name = qualname.split(".")[0]
    if spec is not None and spec.name and spec.name != "__main__":
        module = spec.name
    elif path and path.endswith(".py") and os.path.isfile(path):
        module = os.path.splitext(os.path.basename(path))[0]
        if not module.isidentifier() or keyword.iskeyword(module):
            raise PipelineError(
                f"the {part} {name} is defined in the script {os.path.basename(path)}, whose "
                f"name is not a module name, so {_NEW_PROCESS} cannot import it: rename the "
                "script (e.g. tune_mine.py)."
            )
    else:
        raise PipelineError(
            f"the {part} {name} is defined in __main__ of a notebook or an interactive "
            f"session, and {_NEW_PROCESS} can only import what lives in a module file. Move "
            f"{name} into a .py file next to the notebook (e.g. mypipeline.py), then "
            f"`from mypipeline import {name}` and pass it (or 'mypipeline:{name}')."
        )
    found: Any = main
    for attr in qualname.split("."):
        found = getattr(found, attr, None)
    if not (found is obj or found == obj):
        raise PipelineError(
            f"the {part} {name} is not reachable as {qualname} in {module}: define it at the "
            "top level of the script."
        )
    where = _bound_only_when_run(path, name) if path else None
    if where:
        script = os.path.basename(path)
        raise PipelineError(
            f"the {part} {name} is defined {where} in {script}, which {_NEW_PROCESS} does not "
            f"run: it imports {script} as the module {module}, where {name} does not exist. "
            f"Define {name} with def (or class) at the top level of {script}, above the "
            '`if __name__ == "__main__":` block, and pass it.'
        )
    return module


_MAIN_GUARD = 'under `if __name__ == "__main__":`'


def _bound_only_when_run(path: str, name: str) -> str | None:
    """Where the script at ``path`` binds ``name`` when it is run but not when it is imported
    (the measuring process imports it): ``'under `if __name__ == "__main__":`'`` or ``"inside
    the function main (declared global)"`` (a function that nothing running on import names);
    None when a statement that runs on import binds it, or when the script cannot tell (a star
    import, a name bound some other way)."""
    import ast

    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None
    on_import: set[str] = set()
    named_on_import: set[str] = set()  # names import-time code uses (it may call a function)
    when_run: dict[str, tuple[str, str | None]] = {}  # name -> (where, declaring function)

    def walk(body: list[ast.stmt], where: str | None) -> None:
        for st in body:
            for n in _bound_names(st):
                if where is None:
                    on_import.add(n)
                else:
                    when_run.setdefault(n, (where, None))
            if isinstance(st, ast.If) and _is_main_guard(st.test):
                walk(st.body, where or _MAIN_GUARD)
                walk(st.orelse, where)
                continue
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # Its decorators and defaults run where it is defined, its body when called;
                # it binds module names only where it declares them global.
                run_now: list[ast.AST] = [*st.decorator_list, st.args]
                declared = {n for g in ast.walk(st) if isinstance(g, ast.Global) for n in g.names}
                inner = ast.walk(st)
                bound = {n for x in inner if isinstance(x, ast.stmt) for n in _bound_names(x)}
                for n in declared & bound:
                    when_run.setdefault(n, (f"inside the function {st.name} (declared global)",
                                            st.name))  # fmt: skip
            else:
                run_now = [st]
            if where is None:
                named_on_import.update(
                    x.id for node in run_now for x in ast.walk(node) if isinstance(x, ast.Name)
                )
            if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for inner_body in _nested_bodies(st):  # (a class body binds class attributes)
                    walk(inner_body, where)

    walk(tree.body, None)
    if "*" in on_import or name in on_import or name not in when_run:
        return None
    where, function = when_run[name]
    return None if function in named_on_import else where


def _nested_bodies(st: Any) -> Iterator[list[Any]]:
    """The blocks of statements inside a compound statement (if, for, while, with, try,
    match), which run when it does."""
    for name in ("body", "orelse", "finalbody"):
        yield getattr(st, name, None) or []
    for inner in (getattr(st, "handlers", None) or []) + (getattr(st, "cases", None) or []):
        yield inner.body


def _is_main_guard(test: Any) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    import ast

    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
    ):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides) and any(
        isinstance(x, ast.Constant) and x.value == "__main__" for x in sides
    )


def _bound_names(st: Any) -> set[str]:
    """The names statement ``st`` itself binds (not those of the statements inside it);
    ``"*"`` for a star import."""
    import ast

    if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {st.name}
    if isinstance(st, (ast.Import, ast.ImportFrom)):
        return {a.asname or a.name.split(".")[0] for a in st.names}
    targets: list[Any] = []
    if isinstance(st, ast.Assign):
        targets = st.targets
    elif isinstance(st, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
        targets = [st.target]
    elif isinstance(st, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in st.items if item.optional_vars is not None]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _site_paths() -> set[str]:
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


def _stdlib_paths() -> set[str]:
    """The directories of Python's standard library (a venv's platstdlib holds its
    site-packages too: look there first)."""
    paths = {sysconfig.get_paths().get(key) for key in ("stdlib", "platstdlib")}
    return {os.path.abspath(p) for p in paths if p}


def _installed_paths() -> set[str]:
    """The interpreter's own import directories (every process has them already)."""
    return _site_paths() | _stdlib_paths()


def import_roots(modules: Iterable[str]) -> list[str]:
    """The directory each module's top-level package was imported from (``/x`` for
    ``mypkg.data`` in ``/x/mypkg/data.py``), leaving out the interpreter's own; modules that
    cannot be found are left to fail, with their message, where they are imported."""
    roots: list[str] = []
    installed = _installed_paths()
    for name in modules:
        with _cwd_on_path():
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
    dataset runs a command): the rule a stored pipeline follows (:func:`admit_stored`) holds
    for one given directly too, so that no study stores what no worker would import."""
    if module and _is_stdlib_name(module):
        raise PipelineError(
            f"the {part} {ref} is {module}'s, from Python's standard library: a pipeline part "
            f"must be a function or class of your own (or a package's) that builds the {part}; "
            "the standard library is never imported as one."
        )


def _origin(module: str) -> str | None:
    with _cwd_on_path():
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            return None
    return os.path.abspath(spec.origin) if spec is not None and spec.origin else None


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
        if _is_stdlib_name(module):
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
        if not isinstance(name, str) or (path is None and not _is_stdlib_name(name)):
            raise PipelineError(
                f"refusing {_what(s, source)}: it names a {type(obj).__name__} whose defining "
                "module file cannot be told; a pipeline part is a function or class defined in "
                "your module."
            )
        kind = STDLIB if _is_stdlib_name(name) else _kind(name, path, trust)
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


def _is_stdlib_name(module: str) -> bool:
    top = module.split(".")[0]
    return top in sys.stdlib_module_names or top in sys.builtin_module_names


def _places(module: str) -> list[str]:
    """The files (a namespace package's directories) that importing ``module`` runs, found
    without running any: the top-level package's, then the module's own, searched in the
    package's directories."""
    parts = module.split(".")
    with _cwd_on_path():
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
    if module.split(".")[0] == "loadersearch" or any(_under(p, _site_paths()) for p in paths):
        return INSTALLED  # the tool's own modules are not a pipeline the user wrote
    if any(_under(p, _stdlib_paths()) for p in paths):
        return STDLIB
    return TRUSTED if all(_under(p, trust.dirs()) for p in paths) else ELSEWHERE


def _under(path: str, dirs: Iterable[str]) -> bool:
    for d in dirs:
        d = os.path.realpath(d)
        with contextlib.suppress(ValueError):
            if os.path.commonpath([path, d]) == d:
                return True
    return False
