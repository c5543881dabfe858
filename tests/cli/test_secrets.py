"""A storage password never shows (issue 22, item 2): in whatever place of the URL it is given
(the user-info, with or without an unencoded '@', the query's ``password``, MySQL's ``passwd``,
libpq's ``sslpassword``), on every command that shows a URL, with and without --debug, on the
real PostgreSQL and MariaDB test servers; nor in the measuring processes' command line and
environment during a trial."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time

import psutil
import pytest
from click.testing import CliRunner, Result
from helpers.cliproc import cli_env
from helpers.wait import wait_for

from loadersearch.cli import cli
from loadersearch.storage import redact_url, scrub

USER_PW, QUERY_PW, SSL_PW, ENV_PW = "UserPW4242", "QueryPW99", "SslPW777", "EnvPW5151"
AT_PW = "At@Secret55"  # an unencoded '@': SQLAlchemy alone reads "Secret55" as the host
SECRETS = (USER_PW, QUERY_PW, SSL_PW, ENV_PW, "Secret55")

# One trial of the emulated accelerator, long enough (100 ms steps) to look at its process.
RUN = [
    "--workload", "emulated", "--img-size", "64", "--epochs", "1", "--steps", "2",
    "--windows-per-epoch", "1", "--warmup-epochs", "0", "--no-probe", "--confirm-rounds", "0",
    "--emulated-ms", "100,0", "--space", "batch_size=8:8", "--space", "num_workers=0:0",
    "--no-baselines", "--trials", "1",
]  # fmt: skip


def _leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def _with_password(url: str, password: str) -> str:
    """``url`` (no password) with ``password`` written, unencoded, in its user-info."""
    scheme, _, rest = url.partition("://")
    user, _, host = rest.partition("@")
    return f"{scheme}://{user}:{password}@{host}"


def _with_query(url: str, **query: str) -> str:
    return url + ("&" if "?" in url else "?") + "&".join(f"{k}={v}" for k, v in query.items())


# ------------------------------------------------------------------------ the URL as shown


@pytest.mark.parametrize(
    ("url", "secret", "kept"),
    [
        (f"postgresql+psycopg://alice:{USER_PW}@db:5432/s", USER_PW, "alice:***@db:5432/s"),
        ("postgresql+psycopg://alice:Pa%40ss%2FUserPW4242@db/s", "Pa@ss/UserPW4242",
         "alice:***@db/s"),
        (f"postgresql+psycopg://postgres:p@{USER_PW}@db:5432/s", f"p@{USER_PW}",
         "postgres:***@db:5432/s"),
        (f"postgresql+psycopg://u:p@{USER_PW}:x@db:5432/s", f"p@{USER_PW}:x", "u:***@db:5432/s"),
        (f"postgresql://u:p@{USER_PW}/x@db/s?sslmode=require", f"p@{USER_PW}/x",
         "u:***@db/s?sslmode=require"),
        (f"postgresql://u:p@a?{USER_PW}@db/s", f"p@a?{USER_PW}", "u:***@db/s"),
        (f"postgresql+psycopg://u@db/s?password={QUERY_PW}", QUERY_PW, "u@db/s?password=***"),
        (f"mysql+pymysql://root@db/s?passwd={QUERY_PW}&charset=utf8mb4", QUERY_PW,
         "charset=utf8mb4"),
        (f"postgresql://u@db/s?sslmode=require&sslpassword={SSL_PW}", SSL_PW, "sslpassword=***"),
        (f"postgresql://u@db/s?sslkey=/k/{SSL_PW}.key&sslcert=/k/c.crt", f"/k/{SSL_PW}.key",
         "sslkey=***"),
        (f"mysql+pymysql://u@db/s?ssl_key_password={QUERY_PW}", QUERY_PW, "ssl_key_password=***"),
        (f"not a url://u:{USER_PW}@db/s?password={QUERY_PW}", USER_PW,
         "://***@db/s?password=***"),
        (f"host=db password={QUERY_PW} dbname=s", QUERY_PW, "host=db password=*** dbname=s"),
    ],
)  # fmt: skip
def test_a_secret_in_any_place_of_the_url_is_masked_and_the_rest_is_kept(
    url, secret, kept
) -> None:
    from urllib.parse import quote, quote_plus

    shown = redact_url(url)
    assert not _leaks(shown) and kept in shown, shown
    # a driver's message quoting the URL, or the secret as written or URL-encoded
    message = f"{url} refused {secret!r} ({quote_plus(secret)}, {quote(secret, safe='')})"
    assert not _leaks(scrub(message, url)), scrub(message, url)


def test_a_url_without_secrets_is_shown_as_written() -> None:
    for url in (
        "sqlite:///studies/x.db",
        "sqlite:///a@b.db",
        "mysql+pymysql://root@h/db?charset=utf8mb4&ssl_ca=/etc/ca.pem",
        "postgresql+psycopg://u@h:5432/db?sslmode=require&sslrootcert=/r.crt",
    ):
        assert redact_url(url) == url


def test_only_a_password_s_unencoded_at_is_refused() -> None:
    from loadersearch.errors import StorageError
    from loadersearch.storage import check_url

    for url in (
        f"postgresql+psycopg://postgres:{AT_PW}@127.0.0.1:5432/s",
        f"mysql+pymysql://root:{AT_PW}@127.0.0.1/s?charset=utf8mb4",
    ):
        with pytest.raises(StorageError, match="unencoded '@'") as info:
            check_url(url)
        assert not _leaks(str(info.value)) and "%40" in str(info.value)
    for url in (  # an '@' SQLAlchemy reads as meant: encoded, in a user name, in a value
        "postgresql+psycopg://postgres:At%40Secret55@127.0.0.1:5432/s",
        "postgresql+psycopg://me@corp:pw@127.0.0.1:5432/s",
        "postgresql+psycopg://u:pw@127.0.0.1:5432/my%40db?application_name=me@host",
    ):
        check_url(url)


# ------------------------------------------------------------------------ every command


def _invoke(args: list[str], caplog) -> Result:
    """``loadersearch ARGS`` in this process, its log at DEBUG level captured too."""
    caplog.clear()
    caplog.set_level(logging.DEBUG)
    return CliRunner().invoke(cli, args)


@pytest.fixture
def clean_env(tmp_path, monkeypatch) -> dict[str, str]:
    env = cli_env(tmp_path)
    for key in ("LOADERSEARCH_LOCK_DIR", "LOADERSEARCH_HEARTBEAT"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.delenv("LOADERSEARCH_STORAGE", raising=False)
    return env


def _descendants_sampled(proc: subprocess.Popen, timeout: float) -> tuple[dict, bool]:
    """/proc/PID/cmdline and environ of every process below ``proc`` (sampled until it
    ends), and whether a measuring child (a process two levels below) was among them."""
    seen: dict[int, bytes] = {}
    measured = False
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        assert time.monotonic() < deadline, "the run did not end"
        try:
            below = psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            break
        for child in below:
            try:
                with open(f"/proc/{child.pid}/cmdline", "rb") as f:
                    cmdline = f.read()
                with open(f"/proc/{child.pid}/environ", "rb") as f:
                    environ = f.read()
                grandchild = child.ppid() != proc.pid
            except (OSError, psutil.NoSuchProcess):
                continue  # ended between the listing and the look
            seen[child.pid] = cmdline + b"\0" + environ
            measured = measured or grandchild
        time.sleep(0.01)
    return seen, measured


@pytest.mark.slow
def test_no_command_shows_a_password_on_postgresql(
    postgres_url, study_name, tiny_dataset, tmp_path, clean_env, caplog
) -> None:
    base = postgres_url.split("?")[0]
    every = _with_query(_with_password(base, USER_PW), password=QUERY_PW, sslpassword=SSL_PW)
    # The run itself, in a process whose measuring processes are looked at while it measures;
    # $LOADERSEARCH_STORAGE holds a password too (the measuring processes must not get it).
    env = {**clean_env, "LOADERSEARCH_STORAGE": _with_password(base, ENV_PW)}
    out_path = tmp_path / "run.out"
    with open(out_path, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "loadersearch", "--debug", "run", *RUN, "--data",
             tiny_dataset, "--storage", every, "--study", study_name],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            seen, measured = _descendants_sampled(proc, timeout=240)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    output = out_path.read_text()
    assert proc.returncode == 0, output
    assert not _leaks(output), output
    assert "Open the study: loadersearch dashboard --storage" in output
    assert "postgres:***@" in output and "password=***" in output
    assert seen and measured, "no measuring process was seen during the trial"
    for pid, text in seen.items():
        assert not _leaks(text.decode(errors="replace")), f"process {pid}: {text!r}"

    variants = {
        "user-info": _with_password(base, USER_PW),
        "query password": _with_query(base, password=QUERY_PW),
        "query sslpassword": _with_query(base, sslpassword=SSL_PW),
        "all": every,
    }
    commands = {
        "report": ["report", "--study", study_name],
        "best": ["best", "--study", study_name],
        "worker": ["worker", "--study", study_name],
        "run": ["run", *RUN, "--data", tiny_dataset, "--study", study_name],
    }
    # each place on each command; --debug (which adds debug logs) with all of them at once
    cases = [([], where, url) for where, url in variants.items()] + [(["--debug"], "all", every)]
    for debug, where, url in cases:
        for name, args in commands.items():
            result = _invoke([*debug, *args, "--storage", url], caplog)
            what = f"{name} {debug} with a password in the {where}"
            assert result.exit_code == 0, f"{what}: {result.output}"
            assert not _leaks(result.output + caplog.text), f"{what}: {result.output}"
    for debug in ([], ["--debug"]):  # a real server, stopped once it has said where it is
        text = _dashboard_output([*debug, "dashboard", "--storage", every], clean_env, tmp_path)
        assert "optuna-dashboard on postgresql+psycopg://postgres:***@" in text, text
        assert not _leaks(text), text


def _dashboard_output(args: list[str], env: dict[str, str], tmp_path) -> str:
    with open(tmp_path / "dashboard.out", "w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "loadersearch", *args, "--port", str(_free_port())],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:

            def started() -> bool:
                assert server.poll() is None, (tmp_path / "dashboard.out").read_text()
                return "optuna-dashboard on" in (tmp_path / "dashboard.out").read_text()

            wait_for(started, what="the dashboard's start")
        finally:
            server.terminate()
            server.wait(timeout=30)
        return (tmp_path / "dashboard.out").read_text()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bad_urls() -> list[tuple[str, str]]:
    """(what, URL) the servers refuse, or that the password's '@' makes unusable: each holds
    a password somewhere."""
    urls = []
    postgres = os.environ.get("LOADERSEARCH_TEST_POSTGRES")
    if postgres:
        base = postgres.split("?")[0]
        nodb = base.rsplit("/", 1)[0] + "/lstest_no_such_db"
        urls += [
            ("postgresql, no such database", _with_query(
                _with_password(nodb, USER_PW), password=QUERY_PW, sslpassword=SSL_PW)),
            ("postgresql, unencoded @", _with_password(base, AT_PW)),
        ]  # fmt: skip
    mysql = os.environ.get("LOADERSEARCH_TEST_MYSQL")
    if mysql:  # root has no password: any password given is refused
        base = mysql.split("?")[0]
        urls += [
            ("mysql, user-info", _with_password(base, USER_PW)),
            ("mysql, passwd=", _with_query(base, passwd=QUERY_PW)),
            ("mysql, password=", _with_query(base, password=QUERY_PW)),
            ("mysql, unencoded @", _with_password(base, AT_PW)),
        ]
    return urls


@pytest.mark.filterwarnings("ignore:'passwd' is deprecated:DeprecationWarning")
def test_a_refused_url_is_one_line_without_its_password_with_or_without_debug(
    tiny_dataset, clean_env, caplog
) -> None:
    urls = _bad_urls()
    if not urls:
        pytest.skip("$LOADERSEARCH_TEST_POSTGRES and $LOADERSEARCH_TEST_MYSQL are not set")
    commands = {
        "run": ["run", *RUN, "--data", tiny_dataset, "--study", "s"],
        "worker": ["worker", "--study", "s"],
        "report": ["report", "--study", "s"],
        "best": ["best", "--study", "s"],
        "dashboard": ["dashboard", "--port", "1"],
        "diagnose": ["diagnose", "--study", "s", "--data", tiny_dataset],
    }
    for what, url in urls:
        for name, args in commands.items():
            codes = []
            for debug in ([], ["--debug"]):
                result = _invoke([*debug, *args, "--storage", url], caplog)
                context = f"{name} {debug} ({what}): {result.output}"
                codes.append(result.exit_code)
                assert not _leaks(result.output + caplog.text), context
                errors = [ln for ln in result.output.splitlines() if ln.startswith("Error: ")]
                assert len(errors) == 1, context
                assert ("Traceback" in result.output) == bool(debug), context
                if "unencoded" in what:
                    assert "unencoded '@'" in errors[0] and "%40" in errors[0], context
            assert codes == [2, 2], f"{name} ({what}): exit codes {codes}"


def test_a_log_line_quoting_a_resolved_url_or_its_password_is_scrubbed() -> None:
    from loadersearch.cli import _SCRUB
    from loadersearch.storage import resolve_storage_url

    url = resolve_storage_url(f"postgresql+psycopg://u:{USER_PW}@db/s?password={QUERY_PW}")
    try:
        raise RuntimeError(f"driver said: bad password {QUERY_PW}")
    except RuntimeError:
        exc_info = sys.exc_info()
    record = logging.LogRecord(
        "optuna", logging.WARNING, __file__, 1, "%s: %s", (url, USER_PW), exc_info
    )
    assert _SCRUB.filter(record)
    assert logging.Formatter().format(record).count("***") >= 3
    assert not _leaks(logging.Formatter().format(record))
