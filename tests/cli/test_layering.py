"""The command line sits on top: no library module imports it, not even inside a function
(the API renders its answer and progress with loadersearch.report, as the CLI does)."""

from __future__ import annotations

import ast
from pathlib import Path

import loadersearch

PACKAGE = Path(loadersearch.__file__).parent


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_no_library_module_imports_the_command_line() -> None:
    library = [
        p
        for p in PACKAGE.rglob("*.py")
        if "cli" not in p.relative_to(PACKAGE).parts and p.name != "__main__.py"
    ]
    assert len(library) > 50  # the walk found the package
    upward = {
        str(p.relative_to(PACKAGE)): sorted(
            n for n in _imports(p) if n == "loadersearch.cli" or n.startswith("loadersearch.cli.")
        )
        for p in library
    }
    assert {path: names for path, names in upward.items() if names} == {}
