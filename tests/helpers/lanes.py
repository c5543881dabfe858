"""The two lanes of the suite: the fast lane (``scripts/test.sh --fast``, ``-m "not slow"``)
runs the tests that start no measuring process; the full suite runs them all.

A test is ``slow`` when it is marked so by hand, or, marked here at collection, when it uses a
measuring fixture (:data:`MEASURING_FIXTURES`, directly or through another fixture), names a
measuring helper (:func:`measuring_helpers`, directly or through a function of its module or
one of its fixtures), runs a measuring ``loadersearch`` command with data to measure, or runs
a script that measures; or when it runs on a database server (:func:`on_a_server`) or runs a
whole study in this process (:func:`runs_a_study`).

And a guard holds the line in every run: a test not marked ``slow`` that starts a measuring
process (a fork server or a measuring child, or a ``loadersearch run/bench/worker/diagnose/
confirm`` process, seen in this process's calls and among its descendants) fails, naming the
process, so that the fast lane never measures and a new measuring test is marked."""

from __future__ import annotations

import os
import shlex
import sys
import threading
import time
import types
from collections.abc import Iterable

import psutil
import pytest

from helpers.procs import CHILD_MODULE, SERVER_ENTRY

# The fixtures that measure (or whose tests do): a real study, outside load for a measurement,
# the measurement tests' plan.
MEASURING_FIXTURES = frozenset({"emulated_study", "burners", "quick_plan"})

# `loadersearch COMMAND` that measure (or start a process that does), given data to measure:
# a generated dataset, or a study whose stored pipeline makes one.
MEASURING_COMMANDS = frozenset({"run", "bench", "worker", "diagnose", "confirm"})
DATA_FIXTURES = frozenset({"tiny_dataset", "tiny_voc", "tiny_coco", "pipeline_db"})


def measuring_helpers() -> list[object]:
    """The functions and option lists that only a measuring test uses."""
    import loadersearch
    import loadersearch.diagnose
    import loadersearch.measure
    from helpers import cliproc, procs, studies

    return [
        loadersearch.measure.measure,
        loadersearch.tune,
        loadersearch.bench,
        loadersearch.diagnose.diagnose,
        cliproc.FAST,  # the options of a CLI study
        cliproc.CATCHABLE,
        cliproc.start_cli,
        studies.E2E_OPTIONS,
        procs.measurement_processes,
        procs.fork_servers,
    ]


def _cli_entries() -> list[object]:
    """What runs a ``loadersearch`` command in this process."""
    from helpers import studies
    from loadersearch.cli import cli

    return [cli, studies.run_cli]


# A script a test runs in a child process measures when it holds one of these.
MEASURING_SCRIPTS = (
    "from loadersearch.measure import measure",
    "import tune",
    "loadersearch.tune(",
)


# -- marking at collection --------------------------------------------------------------------


def _strings(value: object) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, tuple | list | frozenset | set):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)


class _Refs:
    """What a test's code names: objects (globals, attributes of the modules it names, names
    it imports in a function) and string constants, through the functions of its own module
    that it calls, recursively."""

    def __init__(self) -> None:
        self.objects: dict[int, object] = {}
        self.strings: set[str] = set()
        self._seen: set[int] = set()

    def add(self, func: object) -> None:
        func = getattr(func, "__func__", func)
        code = getattr(func, "__code__", None)
        if code is None or id(func) in self._seen:
            return
        self._seen.add(id(func))
        names: set[str] = set()
        codes = [code]
        while codes:
            c = codes.pop()
            names.update(c.co_names)
            for k in c.co_consts:
                if isinstance(k, types.CodeType):
                    codes.append(k)
                else:
                    self.strings.update(_strings(k))
        module = getattr(func, "__globals__", {})
        modules = [m for m in module.values() if isinstance(m, types.ModuleType)]
        modules += [sys.modules[n] for n in names if n in sys.modules]  # function-local imports
        ours = [m for m in modules if m.__name__.split(".")[0] in ("loadersearch", "helpers")]
        for name in names:
            found = [module[name]] if name in module else []
            found += [m.__dict__[name] for m in modules if name in m.__dict__]
            found += [getattr(m, name) for m in ours if hasattr(m, name)]  # lazy attributes
            for obj in found:
                self.objects[id(obj)] = obj
                if isinstance(obj, str):
                    self.strings.add(obj)
                if isinstance(obj, types.FunctionType) and obj.__module__ == func.__module__:
                    self.add(obj)

    def names_any(self, objects: Iterable[object]) -> object | None:
        return next((o for o in objects if id(o) in self.objects), None)


def measures(item: pytest.Item) -> str | None:
    """Why ``item`` measures, judged from its fixtures, the helpers its code names and the
    commands it runs (None: nothing says so)."""
    used = set(getattr(item, "fixturenames", ()))
    fixture = sorted(used & MEASURING_FIXTURES)
    if fixture:
        return f"the fixture {fixture[0]}"
    refs = _Refs()
    refs.add(getattr(item, "function", None))
    info = getattr(item, "_fixtureinfo", None)
    for name in used:
        for fixturedef in info.name2fixturedefs.get(name, ()) if info else ():
            refs.add(fixturedef.func)
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        refs.strings.update(_strings(callspec.params))
    helper = refs.names_any(measuring_helpers())
    if helper is not None:
        return getattr(helper, "__name__", "the options of a CLI study")
    commands = sorted(refs.strings & MEASURING_COMMANDS)
    in_process = refs.names_any(_cli_entries()) is not None
    cli = in_process or {"-m", "loadersearch"} <= refs.strings
    if commands and cli and used & DATA_FIXTURES:  # a command that fails at its options does not
        return f"loadersearch {commands[0]} on data"
    script = next((s for s in refs.strings for m in MEASURING_SCRIPTS if m in s), None)
    if script is not None:
        return "a measuring script"
    return None


def whole_study_helpers() -> list[object]:
    """What runs a whole Optuna study in this process (on injected measurements: seconds of
    database writes, sampling and reports)."""
    import optuna

    from helpers import studies
    from loadersearch.search import optimize_to_total, run_study

    return [run_study, optimize_to_total, optuna.study.Study.optimize, studies.quick_settings]


def runs_a_study(item: pytest.Item) -> bool:
    refs = _Refs()
    refs.add(getattr(item, "function", None))
    info = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        for fixturedef in info.name2fixturedefs.get(name, ()) if info else ():
            refs.add(fixturedef.func)
    return refs.names_any(whole_study_helpers()) is not None


def on_a_server(item: pytest.Item) -> bool:
    """Whether ``item`` runs on a PostgreSQL or MariaDB test server (the fast lane keeps its
    SQLite case; a server's cases start processes and servers' waits of seconds)."""
    used = set(getattr(item, "fixturenames", ()))
    params = getattr(getattr(item, "callspec", None), "params", {})
    backends = [params.get(name) for name in ("storage_url", "shared_url")]
    return bool(used & {"postgres_url", "limited_user"}) or any(
        b is not None and b[1] is not None for b in backends
    )


def mark_slow(items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test that :func:`measures`, runs :func:`on_a_server` or
    :func:`runs_a_study`."""
    for item in items:
        if item.get_closest_marker("slow") is None and (
            measures(item) or on_a_server(item) or runs_a_study(item)
        ):
            item.add_marker(pytest.mark.slow)


# -- the guard --------------------------------------------------------------------------------


def measuring_process(argv: Iterable[str]) -> str | None:
    """What a process with command line ``argv`` is, when it measures (None: it does not)."""
    argv = [str(a) for a in argv]
    text = " ".join(argv)
    if SERVER_ENTRY in text:
        return "a measurement fork server"
    if CHILD_MODULE in text:
        return "a measuring child"
    for i, arg in enumerate(argv):
        module = arg == "loadersearch" and i > 0 and argv[i - 1] == "-m"
        script = os.path.basename(arg) == "loadersearch" and i == 0
        if module or script:
            command = next((a for a in argv[i + 1 :] if not a.startswith("-")), None)
            if command in MEASURING_COMMANDS:
                return f"loadersearch {command}"
    return None


class _Guard:
    """What measuring processes the running test started: from this process's own
    ``subprocess.Popen`` calls (an audit hook) and among its descendants (sampled by a thread,
    so that a process a child started is seen too: a measurement runs for seconds)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = threading.Event()
        self.started_at = 0.0
        self.seen: list[str] = []
        self.known: set[int] = set()
        self.thread: threading.Thread | None = None
        self.hooked = False

    def start(self) -> None:
        if not self.hooked:
            sys.addaudithook(self._audit)
            self.hooked = True
        if self.thread is None:
            self.thread = threading.Thread(target=self._sample, name="lanes-guard", daemon=True)
            self.thread.start()
        with self.lock:
            self.seen = []
            self.known = set()
            self.started_at = time.time()
        self.active.set()

    def stop(self) -> list[str]:
        self.active.clear()
        with self.lock:
            return list(dict.fromkeys(self.seen))

    def _note(self, what: str) -> None:
        with self.lock:
            self.seen.append(what)

    def _audit(self, event: str, args: tuple) -> None:
        if event != "subprocess.Popen" or not self.active.is_set():
            return
        argv = args[1]
        if isinstance(argv, str | bytes):  # a shell command line
            argv = shlex.split(os.fsdecode(argv))
        what = measuring_process(os.fsdecode(a) for a in argv or ())
        if what:
            self._note(what)

    def _sample(self) -> None:
        me = psutil.Process()
        while True:
            self.active.wait()
            try:
                below = me.children(recursive=True)
            except psutil.Error:
                below = []
            for p in below:
                if p.pid in self.known:
                    continue
                try:
                    if p.create_time() < self.started_at - 1.0:  # an earlier test's
                        self.known.add(p.pid)
                        continue
                    what = measuring_process(p.cmdline())
                except psutil.Error:
                    continue
                self.known.add(p.pid)
                if what:
                    self._note(what)
            time.sleep(0.25)


GUARD = _Guard()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    if item.get_closest_marker("slow") is None:
        GUARD.start()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    try:
        return (yield)
    finally:
        seen = GUARD.stop()
        if seen and item.get_closest_marker("slow") is None:
            pytest.fail(
                f"{item.nodeid} started {', '.join(seen)} but is not marked slow: mark it "
                "@pytest.mark.slow, or use a measuring fixture or helper "
                "(tests/helpers/lanes.py), so that the fast lane leaves it out",
                pytrace=False,
            )
