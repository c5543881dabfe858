from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import traceback

import optuna
import pytest
from helpers.wait import wait_for
from optuna.trial import TrialState

from loadersearch.errors import StorageError
from loadersearch.search import optimize_to_total
from loadersearch.storage import (
    filesystem_type,
    open_storage,
    redact_url,
    storage_warnings,
    study_hosts,
)

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _quadratic(trial: optuna.Trial) -> float:
    x = trial.suggest_float("x", -10, 10)
    return x * x


def test_open_storage_runs_a_study_with_heartbeats_on_each_backend(storage_url, study_name):
    storage = open_storage(storage_url, heartbeat_interval=5, grace_period=20)
    assert storage.get_heartbeat_interval() == 5
    assert storage.warnings == []
    study = optuna.create_study(study_name=study_name, storage=storage)
    study.optimize(_quadratic, n_trials=3)
    again = optuna.load_study(study_name=study_name, storage=open_storage(storage_url))
    assert [t.state for t in again.trials] == [TrialState.COMPLETE] * 3


def test_a_postgresql_connection_has_tcp_keepalives_unless_the_url_sets_its_own(postgres_url):
    """A server that goes silent (a partition: no FIN, no RST) is found dead in ~60 s, not
    after the operating system's 2 hours: libpq's keepalives and TCP user timeout are set on
    the real connection; a value in the URL's query is the user's and wins."""
    sep = "&" if "?" in postgres_url else "?"
    for url, idle in ((postgres_url, "30"), (f"{postgres_url}{sep}keepalives_idle=7", "7")):
        storage = open_storage(url)
        try:
            with storage.engine.connect() as conn:
                params = conn.connection.driver_connection.info.get_parameters()
        finally:
            storage.engine.dispose()
        assert params.get("keepalives") == "1", params
        assert params.get("keepalives_idle") == idle
        assert params.get("keepalives_count") == "3"
        assert params.get("tcp_user_timeout") == "60000"


def test_connect_arguments_keep_what_the_url_says():
    from loadersearch.storage._settings import PG_KEEPALIVE, engine_kwargs

    pg = engine_kwargs("postgresql+psycopg://u@h/db")["connect_args"]
    assert pg == {"connect_timeout": 10, **PG_KEEPALIVE}
    own = engine_kwargs("postgresql+psycopg://u@h/db?connect_timeout=3&tcp_user_timeout=5")
    assert "connect_timeout" not in own["connect_args"]  # the URL's 3 s is used
    assert "tcp_user_timeout" not in own["connect_args"]
    assert own["connect_args"]["keepalives_idle"] == 30
    assert engine_kwargs("mysql+pymysql://root@h/db")["connect_args"] == {"connect_timeout": 10}


def test_redact_url_hides_the_password_and_keeps_the_rest():
    url = "postgresql+psycopg://alice:pa%40ss@db.example:5432/studies"
    assert redact_url(url) == "postgresql+psycopg://alice:***@db.example:5432/studies"
    assert redact_url("sqlite:///studies/x.db") == "sqlite:///studies/x.db"
    assert redact_url("mysql+pymysql://root@h/db") == "mysql+pymysql://root@h/db"
    assert "hunter2" not in redact_url("weird://bob:hunter2@host/x")


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg://user:secret@127.0.0.1:1/db",
        "mysql+pymysql://user:secret@127.0.0.1:1/db",
    ],
    ids=["postgresql", "mysql"],
)
def test_an_unreachable_server_fails_fast_without_showing_the_password(url):
    start = time.monotonic()
    with pytest.raises(StorageError) as info:
        open_storage(url)
    assert time.monotonic() - start < 10
    message = str(info.value)
    assert "secret" not in message
    assert "user:***@127.0.0.1:1/db" in message
    assert "server is running" in message
    # Not even a --debug traceback (the cause chain) shows it.
    assert "secret" not in "".join(traceback.format_exception(info.value))


def test_a_sqlite_file_on_a_network_file_system_gets_a_warning_naming_postgresql(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text(
        f"/dev/sda1 / ext4 rw 0 0\nserver:/export {tmp_path}/shared nfs4 rw,relatime 0 0\n"
    )
    (tmp_path / "shared").mkdir()
    on_nfs = f"sqlite:///{tmp_path}/shared/studies.db"
    assert filesystem_type(str(tmp_path / "shared"), str(mounts)) == "nfs4"
    [warning] = storage_warnings(on_nfs, mounts=str(mounts))
    assert "network file system (nfs4)" in warning and "PostgreSQL" in warning
    assert storage_warnings(f"sqlite:///{tmp_path}/local.db", mounts=str(mounts)) == []


def test_a_sqlite_study_with_trials_from_two_hosts_gets_a_warning(tmp_path, study_name):
    url = f"sqlite:///{tmp_path}/studies.db"
    study = optuna.create_study(study_name=study_name, storage=open_storage(url, heartbeat=False))
    for host in ("node-a", "node-b"):
        trial = study.ask()
        trial.set_user_attr("host", host)
        study.tell(trial, 1.0)
    hosts = study_hosts(study._storage, study._study_id)
    assert hosts == ["node-a", "node-b"]
    [warning] = storage_warnings(url, hosts)
    assert "2 hosts" in warning and "PostgreSQL" in warning
    assert storage_warnings(url, ["node-a"]) == []
    assert storage_warnings("postgresql+psycopg://u@h/db", hosts) == []


_CHILD = textwrap.dedent(
    """
    import sys, time, optuna
    from loadersearch.storage import open_storage
    study = optuna.load_study(study_name=sys.argv[2], storage=open_storage(sys.argv[1]))
    def objective(trial):
        trial.suggest_int("x", 0, 1000)
        print("measuring", flush=True)
        time.sleep(120)
        return 0.0
    study.optimize(objective, n_trials=1)
    """
)


def _wait_for_heartbeat(url: str, name: str) -> None:
    """Poll until the study's (only) trial has a heartbeat recorded."""
    from optuna.storages._rdb import models
    from sqlalchemy.orm import Session

    storage = open_storage(url, heartbeat=False)
    try:
        [trial] = optuna.load_study(study_name=name, storage=storage).trials

        def beats() -> int:
            with Session(bind=storage.engine) as session:
                return (
                    session.query(models.TrialHeartbeatModel)
                    .filter_by(trial_id=trial._trial_id)
                    .count()
                )

        wait_for(beats, what="a heartbeat of the trial", timeout=60, every=0.1)
    finally:
        storage.engine.dispose()


def _wait_for_trials(study: optuna.Study, n: int) -> None:
    def done() -> bool:
        return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))) >= n

    wait_for(done, what=f"{n} completed trials", timeout=60, every=0.05)


def test_a_killed_workers_trial_is_failed_by_its_heartbeat_and_rerun(storage_url, study_name):
    env = {**os.environ, "LOADERSEARCH_HEARTBEAT": "1,2"}
    optuna.create_study(study_name=study_name, storage=open_storage(storage_url))
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, storage_url, study_name],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "measuring"
        # Only a trial with a recorded heartbeat can go stale: wait for the first one.
        _wait_for_heartbeat(storage_url, study_name)
    finally:
        child.kill()  # SIGKILL: no chance to tidy up
        child.wait()
    storage = open_storage(storage_url, heartbeat_interval=1, grace_period=2)
    study = optuna.load_study(study_name=study_name, storage=storage)
    [dead] = study.trials
    assert dead.state == TrialState.RUNNING
    seen = []
    start = time.monotonic()
    # The budget (1) looks taken by the dead trial: the worker waits until its heartbeat is
    # stale, then runs the re-queued configuration.
    ran = optimize_to_total(study, lambda t: seen.append(t.params) or 1.0, 1)
    assert ran == 1 and time.monotonic() - start >= 1
    first, rerun = study.trials
    assert first.state == TrialState.FAIL
    assert rerun.state == TrialState.COMPLETE
    assert seen == [first.params] and rerun.params == first.params
    assert rerun.system_attrs["failed_trial"] == first.number


def _run_while(
    action, study, n_trials, hold: tuple[threading.Event, threading.Event] | None = None
):
    """``study.optimize`` in a thread while ``action`` runs here. With ``hold = (reached,
    release)``, trial 3 sets ``reached`` inside its objective and waits for ``release`` before
    it ends, so that whatever ``action`` does in between meets the study at a known point
    however slowly either thread runs (a loaded machine)."""
    errors = []

    def objective(t):
        if hold is not None and t.number == 3:
            reached, release = hold
            reached.set()
            release.wait(60)
        time.sleep(0.05)
        return _quadratic(t)

    def work():
        try:
            study.optimize(objective, n_trials=n_trials)
        except Exception as e:  # reported by the test
            errors.append(e)

    thread = threading.Thread(target=work)
    thread.start()
    action()
    thread.join(120)
    return errors


def test_a_database_restart_mid_study_is_retried_and_the_study_completes(
    postgres_proxy, study_name, caplog
):
    proxy, url = postgres_proxy
    storage = open_storage(url, retry_seconds=30)
    study = optuna.create_study(study_name=study_name, storage=storage)
    reached, outage = threading.Event(), threading.Event()

    def retried():
        return [r.getMessage() for r in caplog.records if "unreachable" in r.getMessage()]

    def restart():
        # Trial 3 is inside its objective: its result is the next thing stored. (Between
        # trials the outage could meet Optuna's own trial-creation retry, which absorbs a
        # short outage without a word, and the test would see nothing.)
        assert reached.wait(60), "trial 3 never started"
        proxy.stop()  # every connection dropped, new ones refused
        outage.set()  # trial 3 ends now and must store its result through the outage
        # The outage lasts 2 s, and on until the retry has been met (a slow thread).
        start = time.monotonic()
        wait_for(lambda: time.monotonic() - start >= 2.0 and retried(),
                 what="trial 3's result meeting the outage", timeout=30, every=0.05)  # fmt: skip
        proxy.start()

    errors = _run_while(restart, study, n_trials=30, hold=(reached, outage))
    assert errors == []
    assert retried() and all("s3cr3t-pw" not in m for m in retried())
    states = [t.state for t in study.trials]
    assert states == [TrialState.COMPLETE] * 30
    assert sorted(t.number for t in study.trials) == list(range(30))


def test_terminated_server_connections_are_replaced_without_losing_a_trial(
    postgres_url, study_name
):
    import sqlalchemy

    # The study's connections carry the study's name: the server terminates those, and no
    # other client's (another test's, a developer's dashboard).
    own = sqlalchemy.engine.make_url(postgres_url).update_query_dict(
        {"application_name": study_name}
    )
    storage = open_storage(own.render_as_string(hide_password=False), retry_seconds=30)
    study = optuna.create_study(study_name=study_name, storage=storage)
    admin = open_storage(postgres_url, heartbeat=False)
    terminated = []

    def terminate():
        for done in (3, 8, 13):
            _wait_for_trials(study, done)  # between trials, mid-study
            with admin.engine.connect() as conn:
                rows = conn.execute(
                    sqlalchemy.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND application_name = :name"
                    ),
                    {"name": study_name},
                )
                terminated.append(len(rows.fetchall()))

    errors = _run_while(terminate, study, n_trials=30)
    assert errors == []
    assert all(n >= 1 for n in terminated), terminated  # the study's connections were met
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 30


def test_a_database_that_stays_away_stops_the_run_with_a_clear_redacted_error(
    postgres_proxy, study_name
):
    proxy, url = postgres_proxy
    storage = open_storage(url, retry_seconds=2)
    study = optuna.create_study(study_name=study_name, storage=storage)
    study.optimize(_quadratic, n_trials=2)
    proxy.stop()
    with pytest.raises(StorageError) as info:
        study.optimize(_quadratic, n_trials=1)
    message = str(info.value)
    assert "over 2 s" in message  # it gave up after the retry time it was given
    assert "s3cr3t-pw" not in message and ":***@" in message
    assert "lost the connection" in message and "run the same command again" in message
    assert "s3cr3t-pw" not in "".join(traceback.format_exception(info.value))
    proxy.start()
    assert [t.state for t in study.trials][:2] == [TrialState.COMPLETE] * 2


def test_concurrent_workers_share_one_budget_exactly(storage_url, study_name):
    optuna.create_study(study_name=study_name, storage=open_storage(storage_url))
    ran = []

    def worker():
        study = optuna.load_study(study_name=study_name, storage=open_storage(storage_url))
        ran.append(optimize_to_total(study, lambda t: time.sleep(0.1) or _quadratic(t), 7))

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    study = optuna.load_study(study_name=study_name, storage=open_storage(storage_url))
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 7
    numbers = [t.number for t in study.trials]
    assert len(numbers) == len(set(numbers))
    surplus = [t for t in study.trials if "surplus" in t.user_attrs]
    assert sum(ran) == 7 + len(surplus) and all(t.state == TrialState.FAIL for t in surplus)


def test_local_sqlite_storage_uses_write_ahead_logging(tmp_path):
    import sqlite3

    path = tmp_path / "wal.db"
    open_storage(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.fixture(params=["LOADERSEARCH_TEST_POSTGRES", "LOADERSEARCH_TEST_MYSQL"],
                ids=["postgresql", "mysql"])  # fmt: skip
def limited_user(request, study_name):
    """(URL, hold): the test server as a new user allowed 3 connections at once (a server at
    its max_connections, without filling the real one that other tests use); ``hold()``
    takes all 3 and returns a function that gives them back."""
    import sqlalchemy

    url = os.environ.get(request.param)
    if not url:
        pytest.skip(f"${request.param} is not set (no test server for this backend)")
    open_storage(url, heartbeat=False).engine.dispose()  # Optuna's tables exist
    user = study_name.replace("-", "_")
    admin = sqlalchemy.create_engine(url, isolation_level="AUTOCOMMIT")
    base = sqlalchemy.engine.make_url(url)
    if base.get_backend_name() == "postgresql":
        setup = [f"CREATE ROLE {user} LOGIN CONNECTION LIMIT 3",
                 f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {user}",
                 f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {user}"]  # fmt: skip
        teardown = [f"DROP OWNED BY {user}", f"DROP ROLE {user}"]
    else:
        setup = [f"CREATE USER '{user}'@'%' WITH MAX_USER_CONNECTIONS 3",
                 f"GRANT ALL ON {base.database}.* TO '{user}'@'%'"]  # fmt: skip
        teardown = [f"DROP USER '{user}'@'%'"]
    with admin.connect() as c:
        for sql in setup:
            c.execute(sqlalchemy.text(sql))
    limited = base.set(username=user, password=None).render_as_string(hide_password=False)

    def hold():
        engine = sqlalchemy.create_engine(limited, poolclass=sqlalchemy.pool.NullPool)
        held = [engine.connect() for _ in range(3)]

        def release():
            for conn in held:
                conn.close()

        return release

    yield limited, hold
    with admin.connect() as c:
        for sql in teardown:
            c.execute(sqlalchemy.text(sql))
    admin.dispose()


@pytest.mark.slow
def test_a_server_with_no_free_connection_is_waited_for_then_named(
    limited_user, monkeypatch
):
    """64 workers on PostgreSQL's default max_connections (100): 25 exited at once with
    Optuna's "invalid data in the commit" (benchmarks/bench_shared_study.py). A full server
    is waited for (as a lost one is, mid-run), and one that stays full is named, with the
    fix."""
    url, hold = limited_user
    monkeypatch.setenv("LOADERSEARCH_DB_RETRY_SECONDS", "60")
    release = hold()
    threading.Timer(2.0, release).start()  # the other workers finish
    storage = open_storage(url, heartbeat=False)
    assert storage.get_all_studies() is not None
    storage.engine.dispose()

    monkeypatch.setenv("LOADERSEARCH_DB_RETRY_SECONDS", "1")
    release = hold()
    try:
        with pytest.raises(StorageError) as info:
            open_storage(url, heartbeat=False)
    finally:
        release()
    message = str(info.value)
    assert "has no free connection" in message and "had none for 1 s" in message
    assert "max_connections" in message and "invalid data" not in message


def _sqlite_file(path, *statements: str) -> bytes:
    import sqlite3

    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return path.read_bytes()


def test_another_application_s_sqlite_file_is_refused_and_left_as_it_was(tmp_path):
    from loadersearch.errors import StudyError

    path = tmp_path / "app.db"
    before = _sqlite_file(path, "CREATE TABLE users (id INTEGER)", "CREATE TABLE orders (n)")
    with pytest.raises(StudyError, match=r"holds no Optuna study \(tables found: orders, users\)"):
        open_storage(f"sqlite:///{path}")
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["app.db"]


def test_a_sqlite_file_another_run_is_creating_optuna_s_tables_in_is_not_refused(tmp_path):
    # Optuna creates its tables one statement at a time: a run starting beside the one that
    # creates them may find only the first.
    path = tmp_path / "new.db"
    _sqlite_file(
        path,
        "CREATE TABLE studies (study_id INTEGER NOT NULL, study_name VARCHAR(512) NOT NULL, "
        "PRIMARY KEY (study_id), UNIQUE (study_name))",
    )
    study = optuna.create_study(storage=open_storage(f"sqlite:///{path}", heartbeat=False))
    study.optimize(_quadratic, n_trials=1)
    assert len(study.trials) == 1
