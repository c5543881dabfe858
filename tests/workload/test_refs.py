"""References to a user's pipeline parts: what a new process can import is named, what it
cannot is refused with the reason and the fix, and the measuring process's path finds the
modules the parent imported."""

from __future__ import annotations

import functools
import os
import sys
import types

import pytest
from helpers import pipelines

from loadersearch.errors import PipelineError
from loadersearch.workload._refs import (
    MEASURING_ENV,
    check_refs,
    child_environ,
    import_roots,
    ref_of,
    resolve,
)
from loadersearch.workload._spec import PipelineSpec
from loadersearch.workload._stored_refs import (
    ELSEWHERE,
    TRUSTED,
    PipelineTrust,
    admit_stored,
    locate_stored,
)

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Holder:
    def build(self) -> None:
        return None

    @classmethod
    def create(cls) -> _Holder:
        return cls()


def test_top_level_functions_classes_and_partials_become_references() -> None:
    assert ref_of(pipelines.make_dataset, "dataset") == ("helpers.pipelines:make_dataset", {})
    assert ref_of(pipelines.Noise, "dataset") == ("helpers.pipelines:Noise", {})
    assert ref_of("a.b:c", "dataset") == ("a.b:c", {})
    part = functools.partial(functools.partial(pipelines.make_dataset, n=8), size=4)
    assert ref_of(part, "dataset") == ("helpers.pipelines:make_dataset", {"n": 8, "size": 4})
    assert ref_of(_Holder.create, "model") == (f"{__name__}:_Holder.create", {})
    import torch

    loss = "torch.nn.modules.loss:CrossEntropyLoss"
    assert ref_of(torch.nn.CrossEntropyLoss, "loss") == (loss, {})


def test_a_lambda_is_refused_with_why_and_what_to_pass() -> None:
    with pytest.raises(PipelineError) as e:
        ref_of(lambda: pipelines.make_dataset(), "dataset")
    text = str(e.value)
    assert "the dataset is a lambda" in text
    assert "cannot import" in text and "new Python process" in text
    assert "top level of a module" in text


def test_closures_bound_methods_and_objects_are_refused() -> None:
    def local_factory() -> None:
        return None

    with pytest.raises(PipelineError, match=r"defined inside a function .*local_factory"):
        ref_of(local_factory, "dataset")
    with pytest.raises(PipelineError, match="method bound to a _Holder object"):
        ref_of(_Holder().build, "model")
    with pytest.raises(PipelineError, match=r"a Noise object.*helpers.pipelines:Noise"):
        ref_of(pipelines.Noise(), "dataset")
    with pytest.raises(PipelineError, match="positional"):
        ref_of(functools.partial(pipelines.make_dataset, 8), "dataset")
    with pytest.raises(PipelineError, match="'module:name'"):
        ref_of("helpers.pipelines.make_dataset", "dataset")


def test_a_function_defined_in_a_notebook_is_refused(monkeypatch) -> None:
    notebook = types.ModuleType("__main__")  # an interactive __main__ has no file

    def make_dataset() -> None:
        return None

    make_dataset.__module__ = "__main__"
    make_dataset.__qualname__ = "make_dataset"
    notebook.make_dataset = make_dataset
    monkeypatch.setitem(sys.modules, "__main__", notebook)
    with pytest.raises(PipelineError) as e:
        ref_of(make_dataset, "dataset")
    assert "__main__ of a notebook" in str(e.value)
    assert "mypipeline:make_dataset" in str(e.value)


def test_a_function_of_the_running_script_is_named_by_the_script(monkeypatch, tmp_path) -> None:
    script = tmp_path / "tune_mine.py"
    script.write_text("def make_dataset():\n    return None\n")
    main = types.ModuleType("__main__")
    main.__file__ = str(script)
    exec(compile(script.read_text(), str(script), "exec"), main.__dict__)
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert ref_of(main.make_dataset, "dataset") == ("tune_mine:make_dataset", {})


def test_resolve_names_the_missing_module_or_attribute() -> None:
    assert resolve("helpers.pipelines:make_model", "model") is pipelines.make_model
    with pytest.raises(PipelineError, match="no module named 'nopkg_xyz'.*PYTHONPATH"):
        resolve("nopkg_xyz.data:make", "dataset")
    with pytest.raises(PipelineError, match="has no 'make_nothing'"):
        resolve("helpers.pipelines:make_nothing", "dataset")
    with pytest.raises(PipelineError, match="not a callable"):
        resolve("helpers.pipelines:annotations", "dataset")
    with pytest.raises(PipelineError, match="nopkg_xyz"):
        check_refs(PipelineSpec(dataset="helpers.pipelines:make_dataset", model="nopkg_xyz:m"))


def test_the_measuring_process_path_holds_the_modules_imported_here() -> None:
    # tests/ is on this process's sys.path (pytest's pythonpath), not on a child's
    assert import_roots(["helpers.pipelines", "torch.nn", "json"]) == [TESTS_DIR]
    spec = PipelineSpec(dataset="helpers.pipelines:make_dataset", loss=None)
    env = child_environ(spec, {"PYTHONPATH": "/first", "HOME": "/h"})
    assert env["PYTHONPATH"].split(os.pathsep) == ["/first", os.getcwd(), TESTS_DIR]
    assert env[MEASURING_ENV] == "1" and env["HOME"] == "/h"


def test_locating_a_stored_pipeline_imports_nothing(tmp_path, monkeypatch) -> None:
    # a package whose __init__ and module leave a file when imported, on the path but not
    # under the working directory
    pkg = tmp_path / "lsloc_pkg"
    pkg.mkdir()
    marker = f"open({str(tmp_path / 'IMPORTED')!r}, 'a').write('x')\n"
    (pkg / "__init__.py").write_text(marker)
    (pkg / "data.py").write_text(marker + "def make():\n    return []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = PipelineSpec(dataset="lsloc_pkg.data:make", dataset_kwargs={"n": 3})
    (found,) = locate_stored(spec, PipelineTrust())
    assert (found.kind, found.where) == (ELSEWHERE, str(pkg / "data.py"))
    assert found.line() == f"dataset lsloc_pkg.data:make(n=3) from {pkg / 'data.py'}"
    (found,) = locate_stored(spec, PipelineTrust(paths=(str(tmp_path),)))
    assert found.kind == TRUSTED
    assert not (tmp_path / "IMPORTED").exists() and "lsloc_pkg" not in sys.modules


def test_installed_packages_need_trust_and_the_standard_library_never_passes() -> None:
    shown: list[str] = []
    installed = PipelineSpec(dataset="torch.utils.data:TensorDataset")
    with pytest.raises(PipelineError, match=r"installed package \(.*site-packages.*--trust-pip"):
        admit_stored(installed, PipelineTrust(), "db", shown.append)
    assert shown == []  # refused before anything is shown or imported
    admit_stored(installed, PipelineTrust(everything=True), "db", shown.append)
    assert shown[0] == "The study's pipeline, from db, trusted (--trust-pipeline):"
    assert shown[1].startswith("  dataset torch.utils.data:TensorDataset() from ")
    for ref in ("json:loads", "helpers.pipelines:torch.hub.load"):
        with pytest.raises(PipelineError, match="standard library|installed package"):
            admit_stored(PipelineSpec(dataset=ref), PipelineTrust(everything=ref[0] == "j"), "db")
    # PyTorch's loss classes are the loss the README's examples use: no flag needed
    mine = {"dataset": "helpers.pipelines:make_dataset", "model": "helpers.pipelines:make_model"}
    admit_stored(PipelineSpec(**mine, loss="torch.nn:CrossEntropyLoss"), PipelineTrust(), "db")
    with pytest.raises(PipelineError, match="installed package"):
        admit_stored(PipelineSpec(**mine, loss="torch.nn:functional.cross_entropy"),
                     PipelineTrust(), "db")  # fmt: skip


@pytest.mark.parametrize(
    ("source", "where"),
    [
        ('if __name__ == "__main__":\n    def make_dataset():\n        return None\n',
         'under `if __name__ == "__main__":`'),
        ("def main():\n    global make_dataset\n\n    def make_dataset():\n        return None\n"
         '\n\nif __name__ == "__main__":\n    main()\n',
         "inside the function main (declared global)"),
    ],
)  # fmt: skip
def test_a_function_the_script_defines_only_when_run_is_refused(monkeypatch, tmp_path, source,
                                                                 where) -> None:  # fmt: skip
    # Issue 22, 7: the measuring process imports the script, which then does not define it: a
    # study and a failed trial were created before that was found.
    script = tmp_path / "tune_mine.py"
    script.write_text(source)
    main = types.ModuleType("__main__")
    main.__file__ = str(script)
    exec(compile(source, str(script), "exec"), main.__dict__)
    monkeypatch.setitem(sys.modules, "__main__", main)
    with pytest.raises(PipelineError) as e:
        ref_of(main.make_dataset, "dataset")
    text = str(e.value)
    assert text.startswith(f"the dataset make_dataset is defined {where} in tune_mine.py")
    assert "Define make_dataset with def (or class) at the top level of tune_mine.py" in text


@pytest.mark.parametrize(
    "source",
    [
        "try:\n    def make_dataset():\n        return None\nexcept ImportError:\n    pass\n"
        'if __name__ == "__main__":\n    def make_dataset():\n        return 1\n',
        # bound on import by a call: the function that declares it global runs on import
        "def setup():\n    global make_dataset\n\n    def make_dataset():\n        return None\n"
        "\n\nsetup()\n",
    ],
)
def test_a_function_bound_on_import_is_accepted_wherever_else_it_is_also_bound(
    monkeypatch, tmp_path, source
) -> None:
    script = tmp_path / "tune_mine.py"
    script.write_text(source)
    main = types.ModuleType("__main__")
    main.__file__ = str(script)
    exec(compile(source, str(script), "exec"), main.__dict__)
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert ref_of(main.make_dataset, "dataset") == ("tune_mine:make_dataset", {})


def test_a_standard_library_callable_given_directly_is_no_pipeline_part(tmp_path, monkeypatch):
    # Red team (issue 22): `run --dataset os:system --arg dataset.command=...` ran the command,
    # and stored a study no worker would import.
    from loadersearch.errors import PipelineError
    from loadersearch.workload._refs import check_refs

    with pytest.raises(PipelineError, match="os:system is os's, from Python's standard library"):
        check_refs(PipelineSpec(dataset="os:system", loss=None))
    # the same callable reached through a module of one's own
    (tmp_path / "lsalias.py").write_text("from os import getcwd as make_dataset\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PipelineError, match="from Python's standard library"):
        check_refs(PipelineSpec(dataset="lsalias:make_dataset", loss=None))
