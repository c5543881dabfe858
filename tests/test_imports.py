"""The package's import graph, read from the source with ``ast``, has no cycle, and no library
module imports the CLI.

Every import counts: a function-local one (it hides a cycle from Python's import machinery, not
from a reader) and one under ``if TYPE_CHECKING:`` (the two modules still need each other).
A package's ``_LAZY`` table (names its ``__getattr__`` imports on first use) counts too.
An edge goes to the module named; importing ``a.b.c`` also runs ``a/__init__.py`` and
``a/b/__init__.py``, but a package's ``__init__`` that re-exports its submodules is no cycle
with them, so those implicit edges are left out."""

from __future__ import annotations

import ast
from pathlib import Path

import loadersearch

PACKAGE = "loadersearch"
ROOT = Path(loadersearch.__file__).resolve().parent

# The library's imports of the CLI still there, each named with what it is for: the branch that
# moves the summary and the progress display out of cli/ (issue 25, item 3) ends both, and the
# lead removes them here after merging it (a stale one fails the test).
KNOWN_EDGES: dict[tuple[str, str], str] = {}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _imports(name: str, source: str, is_package: bool, modules: set[str]) -> set[str]:
    """The package's modules that module ``name`` (``is_package``: an ``__init__.py``) imports
    anywhere in its ``source``: ``from pkg import x`` names the submodule ``pkg.x`` where there
    is one, else ``pkg`` itself; relative imports are resolved."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                # The package a relative import starts from: the module's own for __init__.py.
                parts = name.split(".")
                anchor = parts[: len(parts) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
        elif is_package and _is_lazy_table(node):
            # loadersearch._lazy: {"name": "_module"}, imported on first use
            found.update(f"{name}.{v.value}" for v in node.value.values)
    return {m for m in found if m in modules and m != name}


def _is_lazy_table(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["_LAZY"]
        and isinstance(node.value, ast.Dict)
    )


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: _imports(
            name, path.read_text(encoding="utf-8"), path.name == "__init__.py", set(modules)
        )
        for name, path in modules.items()
    }


def _knots(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan): each module of one
    is on a cycle with each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return components


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle of each knot (:func:`_knots`)."""
    return [_cycle_in(graph, set(c)) for c in _knots(graph)]


def _cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest path back to the component's first module (breadth first)."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:
                    return paths[v] + [start]
                if w not in paths:
                    paths[w] = paths[v] + [w]
                    following.append(w)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a component always has one


def test_the_walk_sees_function_local_relative_and_type_checking_imports() -> None:
    modules = {
        "loadersearch._loader_config",
        "loadersearch.measure",
        "loadersearch.measure._body",
        "loadersearch.measure._loop",
        "loadersearch.measure._result",
        "loadersearch.workload._cache",
    }
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import _body, measure_share\n"  # a submodule, then a name of the package
        "from .._loader_config import LoaderConfig\n"
        "if TYPE_CHECKING:\n"
        "    from loadersearch.measure._result import Window\n"
        "def f():\n"
        "    import loadersearch.workload._cache\n"
        "    from loadersearch.measure._loop import run_loop\n"
    )
    assert _imports("loadersearch.measure._child", source, False, modules) == modules
    # in a package's __init__.py, "." is the package itself
    assert _imports("loadersearch.measure", "from ._result import Window", True, modules) == {
        "loadersearch.measure._result"
    }
    graph = _graph()  # the real tree: the body imports the loop inside its function only
    assert "loadersearch.measure._loop" in graph["loadersearch.measure._body"]
    assert "loadersearch.diagnose._measuring" in graph["loadersearch.diagnose._verdict"]


def test_a_cycle_is_found_and_named_from_its_first_module() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"a"}}
    assert _cycles(graph) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_has_no_import_cycle() -> None:
    graph = _graph()
    said = []
    for knot in _knots(graph):
        cycle = _cycle_in(graph, set(knot))
        rest = sorted(set(knot) - set(cycle))
        said.append(" -> ".join(cycle) + (f" (tangled with {', '.join(rest)})" if rest else ""))
    assert not said, "import cycles:\n" + "\n".join(said)


def test_no_library_module_imports_the_cli() -> None:
    graph = _graph()
    for (source, target), why in KNOWN_EDGES.items():
        assert target in graph[source], f"{source} no longer imports {target} ({why}): drop it"
    cli = f"{PACKAGE}.cli"
    offenders = sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        if source != f"{PACKAGE}.__main__" and not (source + ".").startswith(cli + ".")
        for target in targets
        if (target + ".").startswith(cli + ".") and (source, target) not in KNOWN_EDGES
    )
    assert not offenders, "library modules that import the CLI:\n" + "\n".join(offenders)


def _internal_imports(path: Path) -> list[tuple[int, str]]:
    """The loadersearch modules with a ``_`` name anywhere in their dotted path that the file
    at ``path`` imports (line, module): ``loadersearch._api``, ``loadersearch.search._space``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for dotted in names:
            parts = dotted.split(".")
            if parts[0] == PACKAGE and any(p.startswith("_") for p in parts[1:]):
                found.append((node.lineno, dotted))
                break
    return found


# Code that reaches into another package's internals on purpose, each with its reason.
KNOWN_INTERNAL: dict[tuple[str, str], str] = {
    ("benchmarks/bench_tabular/io_server.py", "loadersearch.workload._datasets"): (
        "replaces open_dataset where the measuring child looks it up, to serve its files"
    ),
}


def _allowed(internal: str, home: str | None) -> bool:
    """Whether code of package ``home`` (``"loadersearch.search"``; ``"loadersearch"`` for the
    top level's own modules and tests; None outside the package) may import ``internal``: a
    package's internals are its own and its subpackages'."""
    parts = internal.split(".")
    owner = ".".join(parts[: next(i for i, p in enumerate(parts) if p.startswith("_"))])
    return home is not None and (home + ".").startswith(owner + ".")


def test_code_outside_a_package_imports_its_surface_not_its_modules() -> None:
    """The ``_`` convention, checked: a module with a ``_`` name is internal to its package;
    other packages, the benchmarks, scripts, examples and the tests of other packages import
    what the package's ``__init__`` exports (its ``__all__``). The tests of a package
    (``tests/search/`` for ``loadersearch.search``; ``tests/`` itself for the top level's
    modules) may reach into its internals."""
    repo = ROOT.parent
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        home = _module_name(path if path.name == "__init__.py" else path.parent / "__init__.py")
        for line, internal in _internal_imports(path):
            if not _allowed(internal, home):
                offenders.append(f"{path.relative_to(repo)}:{line}: {internal}")
    for folder in ("benchmarks", "scripts", "examples", "tests"):
        for path in sorted((repo / folder).rglob("*.py")):
            rel = path.relative_to(repo)
            home = None
            if folder == "tests" and rel.parts[1] != "helpers":
                # tests/test_x.py: the top level; tests/search/...: loadersearch.search
                home = PACKAGE if len(rel.parts) == 2 else f"{PACKAGE}.{rel.parts[1]}"
            for line, internal in _internal_imports(path):
                if not _allowed(internal, home) and (str(rel), internal) not in KNOWN_INTERNAL:
                    offenders.append(f"{rel}:{line}: {internal}")
    assert not offenders, (
        "imports of another package's internals (import what its __init__ exports):\n"
        + "\n".join(offenders)
    )


def test_every_package_surface_lists_what_it_exports() -> None:
    """Each package's ``__all__`` names exactly what it imports or defines for others, and each
    name resolves (a lazy one too)."""
    import importlib

    for name, path in _modules().items():
        if path.name != "__init__.py" or any(p.startswith("_") for p in name.split(".")):
            continue
        package = importlib.import_module(name)
        exported = getattr(package, "__all__", None)
        assert exported is not None, f"{name} has no __all__"
        assert len(set(exported)) == len(exported), f"{name}.__all__ repeats a name"
        for item in exported:
            assert getattr(package, item) is not None or item.isupper(), f"{name}.{item}"


def test_every_name_imported_from_the_package_is_there() -> None:
    """Each ``from loadersearch... import name`` in the library, benchmarks, scripts, examples
    and tests names something that exists, function-local imports included: a name moved out
    of a package's surface fails here, not in the one slow test whose code path reaches it."""
    import importlib

    repo = ROOT.parent
    missing = []
    for folder in ("loadersearch", "benchmarks", "scripts", "examples", "tests"):
        for path in sorted((repo / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not (
                    isinstance(node, ast.ImportFrom)
                    and node.level == 0
                    and (node.module or "").split(".")[0] == PACKAGE
                ):
                    continue
                module = importlib.import_module(node.module)
                for alias in node.names:
                    if hasattr(module, alias.name) or f"{node.module}.{alias.name}" in _modules():
                        continue
                    missing.append(f"{path.relative_to(repo)}:{node.lineno}: "
                                   f"{node.module}.{alias.name}")  # fmt: skip
    assert not missing, "imported names that are not there:\n" + "\n".join(missing)
