"""Shared fixtures: small generated datasets (session-scoped, written once per test run), and
one list of storage backends with one fixture parametrised over it (Optuna's shape): every
storage test runs on a SQLite file and, when ``$LOADERSEARCH_TEST_POSTGRES`` /
``$LOADERSEARCH_TEST_MYSQL`` name a server (``.ci/run`` sets both), on PostgreSQL and MariaDB.
Studies are named uniquely per test and deleted afterwards, so runs never see each other's.
Also one real finished study (``emulated_study``), made once per test run."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import psutil
import pytest
from helpers import cputime, lanes
from helpers.studies import E2E_OPTIONS, EmulatedStudy, run_cli
from helpers.wait import wait_for

TINY_IMAGES = 16
TINY_SEED = 7


def pytest_configure(config: pytest.Config) -> None:
    """The suite takes a host-lock directory of its own: a study a user is running on this
    machine holds the machine-wide lock, and a test must neither wait on it nor disturb it.
    (The lock's own tests set theirs per test; two test runs never share one either.)"""
    import tempfile

    os.environ["LOADERSEARCH_LOCK_DIR"] = tempfile.mkdtemp(prefix="loadersearch-test-locks-")
    # A confirmation round measured while other work shares the machine (another test run, a
    # user's study) would wait up to 5 minutes for quiet: the tests that wait set their own.
    os.environ["LOADERSEARCH_QUIET_WAIT_S"] = "0"
    # The suite runs in two processes (scripts/test.sh: pytest-xdist), so a measurement always
    # has the other half of the suite beside it: with the default threshold (a quarter of the
    # CPUs) nearly every trial would be busy and measured again. The tests of the busy-machine
    # rules set their own threshold.
    os.environ.setdefault("LOADERSEARCH_BUSY_SHARE", "0.9")
    # One torch thread in the test process (the processes it starts keep torch's default): on
    # a busy 2-core machine two OpenMP threads spin-wait for each other, and a 30-step training
    # test took 154 s with two threads and 21 s with one (load average 9).
    import torch

    torch.set_num_threads(1)
    # Where the time goes, test by test (wall and CPU seconds): helpers/cputime.py.
    if os.environ.get(cputime.LOG_VARIABLE):
        config.pluginmanager.register(cputime.CpuLog(os.environ[cputime.LOG_VARIABLE]))


# The guard of the fast lane: a test not marked slow fails if it starts a measuring process.
pytest_runtest_setup = lanes.pytest_runtest_setup
pytest_runtest_teardown = lanes.pytest_runtest_teardown


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that measure or use a database server are marked ``slow`` (helpers/lanes.py: from
    the fixtures and helpers they use), so that the fast lane leaves them out. Tests marked
    ``cuda`` need a CUDA device: skipped (never deleted) where there is none;
    scripts/gpu_acceptance.sh runs them on a GPU machine."""
    lanes.mark_slow(items)
    # The shared emulated study is made once per test process: its tests run in one. The tests
    # on a database server run in one too: some stop connections, add and drop users or
    # create Optuna's tables, which a test of the other process on the same server would meet.
    for item in items:
        if "emulated_study" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("emulated_study"))
        elif lanes.on_a_server(item):
            item.add_marker(pytest.mark.xdist_group("database_servers"))
    marked = [item for item in items if item.get_closest_marker("cuda")]
    if not marked:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device")
    for item in marked:
        item.add_marker(skip)


def _generate(tmp_path_factory: pytest.TempPathFactory, fmt: str) -> str:
    from loadersearch.workload import make_dataset

    root = tmp_path_factory.mktemp(f"tiny-{fmt}")
    make_dataset(root, images=TINY_IMAGES, fmt=fmt, seed=TINY_SEED)
    return str(root)


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A generated YOLO-layout dataset of 16 VOC-like images (500x375 / 375x500, 20 classes).

    Shared by the whole session: copy it before changing anything in it.
    """
    return _generate(tmp_path_factory, "yolo")


@pytest.fixture(scope="session")
def tiny_voc(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The same 16 images as ``tiny_dataset``, in Pascal VOC layout. Read-only."""
    return _generate(tmp_path_factory, "voc")


@pytest.fixture(scope="session")
def tiny_coco(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The same 16 images as ``tiny_dataset``, in COCO layout. Read-only."""
    return _generate(tmp_path_factory, "coco")


# (backend id, environment variable with its URL; None for the SQLite file in tmp_path)
BACKENDS = [
    ("sqlite", None),
    ("postgresql", "LOADERSEARCH_TEST_POSTGRES"),
    ("mysql", "LOADERSEARCH_TEST_MYSQL"),
]
SERVER_BACKENDS = [b for b in BACKENDS if b[1] is not None]


def server_url(env_var: str) -> str:
    """The URL in ``env_var``, or skip the test (a user's machine may have no server)."""
    url = os.environ.get(env_var)
    if not url:
        pytest.skip(f"${env_var} is not set (no test server for this backend)")
    return url


def _delete_studies(url: str, prefix: str) -> None:
    import optuna

    storage = optuna.storages.RDBStorage(url)
    try:
        for study in storage.get_all_studies():
            if study.study_name.startswith(prefix):
                storage.delete_study(study._study_id)
    finally:
        storage.engine.dispose()


@pytest.fixture
def study_name() -> str:
    """A study name no other test (or earlier run) uses."""
    return f"lstest-{uuid.uuid4().hex[:12]}"


def _url_for(backend: tuple[str, str | None], tmp_path) -> str:
    name, env_var = backend
    if env_var is None:
        return f"sqlite:///{tmp_path / 'studies.db'}"
    return server_url(env_var)


@pytest.fixture(params=BACKENDS, ids=[b[0] for b in BACKENDS])
def storage_url(request, tmp_path, study_name) -> Iterator[str]:
    """A storage URL of each backend; studies named with ``study_name``'s prefix are deleted
    after the test."""
    url = _url_for(request.param, tmp_path)
    yield url
    _delete_studies(url, study_name)


# Several processes (run, workers) on one study: a SQLite file behaves the same on one machine,
# so these run on SQLite everywhere and on PostgreSQL where a server is set. (MySQL is covered
# by the storage tests; twice the processes would only repeat them.)
SHARED_BACKENDS = [b for b in BACKENDS if b[0] in ("sqlite", "postgresql")]


@pytest.fixture(params=SHARED_BACKENDS, ids=[b[0] for b in SHARED_BACKENDS])
def shared_url(request, tmp_path, study_name) -> Iterator[str]:
    """A storage URL that several CLI processes share: a SQLite file, or PostgreSQL."""
    url = _url_for(request.param, tmp_path)
    yield url
    _delete_studies(url, study_name)


@pytest.fixture
def postgres_url(study_name) -> Iterator[str]:
    """The PostgreSQL test server (skips without one); the test's studies are deleted after."""
    url = server_url("LOADERSEARCH_TEST_POSTGRES")
    yield url
    _delete_studies(url, study_name)
@pytest.fixture
def burners():
    """Two processes that burn a CPU each, running (polled) before the test goes on. They are
    the test process's children: measure in another process to see them as outside load."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(2)
    ]
    try:
        for p in procs:
            ps = psutil.Process(p.pid)
            ran = lambda ps=ps: ps.cpu_times().user >= 0.2  # noqa: E731
            wait_for(ran, what="the burners running", timeout=60, every=0.05)
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()


@pytest.fixture(scope="session")
def emulated_study(tiny_dataset: str, tmp_path_factory: pytest.TempPathFactory) -> EmulatedStudy:
    """A real study on the emulated accelerator, run once per session and shared (read-only)
    by the study, report, best and dashboard tests: real measuring child processes, a real
    SQLite file, a resume that confirms."""
    db_path = os.path.join(str(tmp_path_factory.mktemp("study")), "e2e.db")
    storage = f"sqlite:///{db_path}"
    base = ["run", *E2E_OPTIONS, "--data", tiny_dataset, "--storage", storage, "--study", "e2e"]
    first = run_cli([*base, "--trials", "6", "--confirm-rounds", "0"])
    assert first.exit_code == 0, first.output
    second = run_cli([*base, "--trials", "8", "--confirm-rounds", "1"])
    assert second.exit_code == 0, second.output
    return EmulatedStudy(storage=storage, db_path=db_path, name="e2e", first=first, second=second)
