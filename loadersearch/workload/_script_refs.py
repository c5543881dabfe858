"""Naming a function or class defined in the script that was run (``python tune_mine.py``):
the measuring process, a new Python process, imports that script as a module, so a part is
named by the script's module name, and one the script binds only when it is run (under
``if __name__ == "__main__":``, or inside a function that declares it global) is refused
with the fix. Reads the script with ``ast``; imports nothing of it.
"""

from __future__ import annotations

import keyword
import os
import sys
from collections.abc import Iterator
from typing import Any

from loadersearch.errors import PipelineError

NEW_PROCESS = "the measuring process (a new Python process)"


def main_module_name(obj: Any, part: str, qualname: str) -> str:
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
                f"name is not a module name, so {NEW_PROCESS} cannot import it: rename the "
                "script (e.g. tune_mine.py)."
            )
    else:
        raise PipelineError(
            f"the {part} {name} is defined in __main__ of a notebook or an interactive "
            f"session, and {NEW_PROCESS} can only import what lives in a module file. Move "
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
            f"the {part} {name} is defined {where} in {script}, which {NEW_PROCESS} does not "
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
        isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
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
