#!/usr/bin/env python
"""Load test of one shared study: N concurrent ``loadersearch worker`` processes on one
PostgreSQL and one MariaDB study, as a Slurm array starts them.

For each backend and each N (``--workers 1,8,32,64``): a study is created once, as the README's
"Many machines" section says (``loadersearch run --study S --trials 1``: it measures the first
baseline and queues the others), then N ``loadersearch worker --study S --trials 200`` processes
are started at once, each with its own ``LOADERSEARCH_HOST`` (so the host lock does not
serialise them), and run until the study holds its total. Checked afterwards, from the
database and the logs: exactly ``--trials`` finished trials, each baseline finished once, no
trial RUNNING or WAITING, no ``IntegrityError`` in any log, every process exit 0.

Measured:

* **storage time per trial**: every worker runs with a timer around each outermost call of
  Optuna's ``RDBStorage`` API (the retrying storage of ``loadersearch/storage/_retrying.py``,
  so retries and their back-off count; nested calls are not counted twice; SQLAlchemy's pool
  checkout is inside the call). A trial's storage time is what the worker's main thread spent
  in those calls from the trial's start (popping a queued trial or creating one) to the start
  of its next trial: the sampler's reads, the trial's attributes and state, the notes written
  after it, the budget and stale-trial checks before the next. The heartbeat thread's calls
  run beside the trial and are counted apart; a worker's set-up before its first trial, and its
  wait for the last trials to end elsewhere, are not per trial and are counted apart too.
* **server side**, polled every ``--poll`` seconds: connections to the test database
  (PostgreSQL ``pg_stat_activity``, MariaDB ``information_schema.processlist``), lock waits
  (``pg_locks`` not granted; MariaDB ``information_schema.innodb_lock_waits`` and the growth of
  ``Innodb_row_lock_waits``, which count the whole server), and the trials RUNNING at once.

The workload is the emulated accelerator with the smallest plan on a 16-image dataset, with
every knob fixed (``--fix``), so the space holds one configuration: the three baselines clamp
to it, the creating run measures it, and every worker trial reuses that measurement (the
objective's repeat path) without starting a measuring process. A worker is then the CLI process
alone, without torch (~80 MiB USS, printed), which is what lets 64 run on a small machine; and
every trial is storage work and little else, the worst case for the database: a real trial
measures for seconds to minutes between the same calls.

Run from the repository root, with a server of each kind (each run's study is deleted after):
  .venv/bin/python benchmarks/bench_shared_study.py \\
      --postgres postgresql+psycopg://postgres@127.0.0.1:5432/t_loadtest \\
      --mysql mysql+pymysql://root@127.0.0.1:3306/t_loadtest [--workers 1,8] [--trials 40]
The load average is printed: on a busy machine the timings move.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

TIMING_ENV = "BENCH_SHARED_STUDY_TIMING"  # where a timed worker writes its storage timings
GATE_ENV = "BENCH_SHARED_STUDY_GATE"  # directory of the start gate: ready files, then "go"

# The smallest plan on the emulated accelerator, one configuration (every knob fixed).
PLAN = [
    "--workload", "emulated", "--img-size", "64", "--epochs", "1", "--steps", "2",
    "--windows-per-epoch", "1", "--warmup-epochs", "0", "--no-probe", "--confirm-rounds", "0",
    "--emulated-ms", "1,0.1", "--fix", "num_workers=0", "--fix", "batch_size=16",
    "--fix", "pin_memory=false",
]  # fmt: skip


# --- inside a worker process: time the storage calls, then run the CLI ---------------------


def _timed_cli(argv: list[str]) -> None:
    """Run ``loadersearch`` with ``argv`` in this process, timing every outermost storage
    call; the timings are written to ``$BENCH_SHARED_STUDY_TIMING`` at exit."""
    import atexit
    import inspect

    from optuna.storages import RDBStorage
    from optuna.trial import TrialState

    from loadersearch.storage import retrying_storage_class

    cls = retrying_storage_class()
    main = threading.main_thread()
    local = threading.local()
    record: dict = {"setup_s": 0.0, "trials": [], "tail_s": 0.0, "other_threads_s": 0.0,
                    "calls": 0, "other_calls": 0}  # fmt: skip
    current: dict = {}  # the trial in hand: its storage seconds and its start

    def account(name: str, args: tuple, kwargs: dict, seconds: float, cpu: float) -> None:
        if threading.current_thread() is not main:
            record["other_threads_s"] += seconds
            record["other_calls"] += 1
            return
        record["calls"] += 1
        state = kwargs.get("state", args[1] if len(args) > 1 else None)
        starts = name in ("create_new_trial", "_create_new_trial") or (
            name == "set_trial_state_values" and state == TrialState.RUNNING
        )
        if starts:  # this call belongs to the new trial: close the previous one first
            now = time.monotonic() - seconds
            if current:
                record["trials"].append({**current, "cycle_s": now - current["started"]})
            else:
                record["setup_s"] += record.pop("pending_s", 0.0)
            current.clear()
            current.update(storage_s=seconds, cpu_s=cpu, started=now, wall_s=0.0)
            return
        if current:
            current["storage_s"] += seconds
            current["cpu_s"] += cpu
            if name == "set_trial_state_values" and state is not None and state.is_finished():
                current["wall_s"] = time.monotonic() - current["started"]
        else:
            record["pending_s"] = record.get("pending_s", 0.0) + seconds

    def timed(name: str, original):
        def method(self, *args, **kwargs):
            if getattr(local, "depth", 0):  # a call inside a timed call: already counted
                return original(self, *args, **kwargs)
            local.depth = 1
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return original(self, *args, **kwargs)
            finally:
                local.depth = 0
                account(name, args, kwargs, time.perf_counter() - start,
                        time.thread_time() - cpu)  # fmt: skip

        return method

    names = {
        name
        for klass in RDBStorage.__mro__
        for name, value in vars(klass).items()
        if inspect.isfunction(value) and not name.startswith("__")
    }
    for name in sorted(names):
        setattr(cls, name, timed(name, getattr(cls, name)))

    def dump() -> None:
        if current:  # the last trial; what followed it was the wait for the others
            wall = current["wall_s"] or time.monotonic() - current["started"]
            record["trials"].append({**current, "wall_s": wall})
        record["tail_s"] = record.pop("pending_s", 0.0) if not record["trials"] else 0.0
        record["torch_imported"] = "torch" in sys.modules
        with open(os.environ[TIMING_ENV], "w") as f:
            json.dump(record, f)

    atexit.register(dump)
    import psycopg  # noqa: F401
    import pymysql  # noqa: F401 (imported before the gate opens, as the rest)

    from loadersearch.cli import main as cli_main
    from loadersearch.search import optimize_to_total, run_study  # noqa: F401

    # Every worker starts its first storage call at once, as a Slurm array's nodes do: the
    # imports (seconds of CPU each on a small machine) are paid before the gate opens.
    gate = os.environ[GATE_ENV]
    open(os.path.join(gate, f"ready-{os.getpid()}"), "w").close()
    deadline = time.monotonic() + 600
    while not os.path.exists(os.path.join(gate, "go")) and time.monotonic() < deadline:
        time.sleep(0.02)

    sys.argv = ["loadersearch", *argv]
    cli_main()


# --- the benchmark ----------------------------------------------------------------------------


class ServerPoll(threading.Thread):
    """Polls the server every ``interval`` seconds: connections to the database, lock waits,
    RUNNING trials of the study; keeps the peaks and the means."""

    def __init__(self, url: str, study: str, interval: float) -> None:
        super().__init__(daemon=True)
        import sqlalchemy

        self.kind = "postgresql" if url.startswith("postgres") else "mysql"
        self.engine = sqlalchemy.create_engine(
            url, isolation_level="AUTOCOMMIT", poolclass=sqlalchemy.pool.NullPool
        )
        self.db = self.engine.url.database
        self.study = study
        self.interval = interval
        self.stop = threading.Event()
        keys = ("connections", "lock_waits", "running", "threads_connected")
        self.samples: dict[str, list[float]] = {key: [] for key in keys}
        self.errors: list[str] = []

    def queries(self) -> dict[str, str]:
        running = (
            "select count(*) from trials t join studies s on s.study_id = t.study_id "
            f"where s.study_name = '{self.study}' and t.state = 'RUNNING'"
        )
        if self.kind == "postgresql":
            return {
                "connections": "select count(*) from pg_stat_activity "
                f"where datname = '{self.db}' and pid <> pg_backend_pid()",
                "lock_waits": "select count(*) from pg_locks l join pg_stat_activity a "
                f"on a.pid = l.pid where not l.granted and a.datname = '{self.db}'",
                "running": running,
                "threads_connected": "select count(*) from pg_stat_activity "
                "where backend_type = 'client backend'",
            }
        return {
            "connections": "select count(*) from information_schema.processlist "
            f"where db = '{self.db}' and id <> connection_id()",
            "lock_waits": "select count(*) from information_schema.innodb_lock_waits",
            "running": running,
            "threads_connected": "select variable_value from information_schema.global_status "
            "where variable_name = 'THREADS_CONNECTED'",
        }

    def scalar(self, sql: str) -> float:
        import sqlalchemy

        with self.engine.connect() as c:
            return float(c.execute(sqlalchemy.text(sql)).scalar() or 0)

    def run(self) -> None:
        import sqlalchemy

        queries = self.queries()
        with self.engine.connect() as c:  # one connection for every poll: counted out above
            while not self.stop.is_set():
                for key, sql in queries.items():
                    try:
                        self.samples[key].append(float(c.execute(sqlalchemy.text(sql)).scalar()
                                                       or 0))  # fmt: skip
                    except Exception as e:  # a full server refuses the poll too: say so
                        self.errors.append(f"{key}: {str(e).splitlines()[0]}")
                self.stop.wait(self.interval)

    def row_lock_waits(self) -> float | None:
        """MariaDB's server-wide count of row lock waits so far (None on PostgreSQL)."""
        if self.kind != "mysql":
            return None
        return self.scalar(
            "select variable_value from information_schema.global_status "
            "where variable_name = 'INNODB_ROW_LOCK_WAITS'"
        )

    def summary(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for key, values in self.samples.items():
            out[f"{key}_max"] = max(values, default=0)
            out[f"{key}_mean"] = statistics.fmean(values) if values else 0.0
        out["lock_wait_samples"] = sum(v > 0 for v in self.samples["lock_waits"])
        out["samples"] = len(self.samples["connections"])
        return out


def _env(base: dict[str, str], lock_dir: str, host: str) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k != "LOADERSEARCH_STORAGE"}
    return {**env, "LOADERSEARCH_LOCK_DIR": lock_dir, "LOADERSEARCH_HOST": host}


def _kill(procs: list[subprocess.Popen], grace: float = 10.0) -> None:
    """SIGTERM each process group (each worker leads its own), then SIGKILL what is left,
    including descendants that left the group (a measuring process leads one of its own)."""
    import psutil

    tree = []
    for p in procs:
        if p.poll() is None:
            try:
                tree += psutil.Process(p.pid).children(recursive=True)
                os.killpg(p.pid, signal.SIGTERM)
            except (ProcessLookupError, psutil.NoSuchProcess):
                pass
    end = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(end - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    for child in tree:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass


def _memory(procs: list[subprocess.Popen]) -> tuple[float, float]:
    """(sum of USS, largest RSS) over the running workers and their children, in MiB."""
    import psutil

    uss, rss = 0.0, 0.0
    for p in procs:
        try:
            root = psutil.Process(p.pid)
            for q in [root, *root.children(recursive=True)]:
                m = q.memory_full_info()
                uss += m.uss
                rss = max(rss, m.rss)
        except psutil.Error:
            continue
    return uss / 2**20, rss / 2**20


def _create(url: str, study: str, data: str, env: dict[str, str], log: str) -> None:
    cmd = [sys.executable, "-m", "loadersearch", "run", "--study", study, "--storage", url,
           "--trials", "1", "--data", data, "--quiet", *PLAN]  # fmt: skip
    with open(log, "w") as f:
        code = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=300)
    if code.returncode != 0:
        with open(log) as f:
            raise SystemExit(f"creating the study failed (rc {code.returncode}):\n{f.read()}")


def run_case(args, url: str, backend: str, n: int, data: str, workdir: str) -> dict:
    import optuna
    from optuna.trial import TrialState

    study = f"load-{backend}-{n}-{uuid.uuid4().hex[:8]}"
    case_dir = os.path.join(workdir, f"{backend}-{n}")
    os.makedirs(case_dir)
    lock_dir = os.path.join(case_dir, "locks")
    base = dict(os.environ)
    _create(url, study, data, _env(base, lock_dir, "load-create"), f"{case_dir}/create.log")

    poll = ServerPoll(url, study, args.poll)
    row_waits_before = poll.row_lock_waits()
    load_before = os.getloadavg()
    gate = os.path.join(case_dir, "gate")
    os.makedirs(gate)
    procs: list[subprocess.Popen] = []
    logs = []
    peak_uss, peak_rss, timed_out = 0.0, 0.0, False
    ready_uss, imports_s = 0.0, 0.0
    started = time.monotonic()
    try:
        for i in range(n):
            host = f"load-{i:02d}"
            env = {**_env(base, lock_dir, host), TIMING_ENV: f"{case_dir}/{host}.json",
                   GATE_ENV: gate}  # fmt: skip
            log = open(f"{case_dir}/{host}.log", "w")  # noqa: SIM115 (closed below)
            logs.append(log)
            cmd = [sys.executable, __file__, "--as-worker", "worker", "--study", study,
                   "--storage", url, "--trials", str(args.trials), "--quiet"]  # fmt: skip
            procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True))  # fmt: skip
        # All imported and waiting at the gate: open it at once.
        while sum(f.startswith("ready-") for f in os.listdir(gate)) < n:
            if time.monotonic() - started > args.timeout or any(
                p.poll() is not None for p in procs
            ):
                timed_out = True
                break
            time.sleep(0.2)
        ready_uss, peak_rss = _memory(procs)
        peak_uss = ready_uss
        imports_s = time.monotonic() - started
        poll.start()
        open(os.path.join(gate, "go"), "w").close()
        started = time.monotonic()
        next_memory = time.monotonic() + 1.0
        while not timed_out and any(p.poll() is None for p in procs):
            if time.monotonic() - started > args.timeout:
                timed_out = True
                break
            if time.monotonic() >= next_memory:  # USS reads every smaps: not every poll
                uss, rss = _memory(procs)
                peak_uss, peak_rss = max(peak_uss, uss), max(peak_rss, rss)
                next_memory = time.monotonic() + 3.0
            time.sleep(0.5)
    finally:
        _kill(procs)
        for log in logs:
            log.close()
        poll.stop.set()
        if poll.is_alive():
            poll.join(10)
    elapsed = time.monotonic() - started
    load_after = os.getloadavg()
    server = poll.summary()
    row_waits_after = poll.row_lock_waits()
    poll.engine.dispose()

    storage = optuna.storages.RDBStorage(url)
    try:
        study_obj = optuna.load_study(study_name=study, storage=storage)
        trials = study_obj.get_trials(deepcopy=False)
        finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
        left = [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
        baselines: dict[str, int] = {}
        for t in finished:
            name = t.user_attrs.get("baseline")
            if name:
                baselines[name] = baselines.get(name, 0) + 1
        queued = {b["name"] for b in study_obj.user_attrs.get("baselines", [])}
        surplus = sum(1 for t in trials if t.user_attrs.get("surplus"))
        failed = sum(1 for t in trials if t.state == TrialState.FAIL)
        if not args.keep:
            storage.delete_study(storage.get_study_id_from_name(study))
    finally:
        storage.engine.dispose()

    integrity, waited = [], 0
    for i in range(n):
        with open(f"{case_dir}/load-{i:02d}.log", errors="replace") as f:
            text = f.read()
        if "IntegrityError" in text:
            integrity.append(i)
        waited += "has no free connection" in text  # a full server, waited for at open
    codes = [p.returncode for p in procs]
    per_trial, cpu, wall, cycle, beat, setup, torch_in = [], [], [], [], 0.0, [], 0
    for i in range(n):
        try:
            with open(f"{case_dir}/load-{i:02d}.json") as f:
                rec = json.load(f)
        except (OSError, ValueError):
            continue  # killed before its exit handler ran
        per_trial += [t["storage_s"] for t in rec["trials"]]
        cpu += [t["cpu_s"] for t in rec["trials"]]
        wall += [t["wall_s"] for t in rec["trials"]]
        cycle += [t["storage_s"] / t["cycle_s"] for t in rec["trials"] if t.get("cycle_s")]
        beat += rec["other_threads_s"]
        setup.append(rec["setup_s"])
        torch_in += bool(rec["torch_imported"])

    def pct(values: list[float], q: float) -> float:
        return sorted(values)[min(int(q * len(values)), len(values) - 1)] if values else 0.0

    checks = {
        "finished": len(finished),
        "exact": len(finished) == args.trials,
        "baselines_once": bool(queued) and baselines == dict.fromkeys(queued, 1),
        "left_running_or_waiting": len(left),
        "integrity_error_logs": integrity,
        "nonzero_exits": sorted({c for c in codes if c != 0}),
        "timed_out": timed_out,
    }
    return {
        "backend": backend,
        "workers": n,
        "trials": args.trials,
        "elapsed_s": elapsed,
        "load_before": load_before,
        "load_after": load_after,
        "checks": checks,
        "ok": checks["exact"] and checks["baselines_once"] and not left and not integrity
        and not checks["nonzero_exits"] and not timed_out,
        "baselines": baselines,
        "surplus_fail": surplus,
        "waited_for_a_connection": waited,
        "failed": failed,
        "storage_per_trial_mean_ms": 1e3 * statistics.fmean(per_trial) if per_trial else 0.0,
        "storage_per_trial_median_ms": 1e3 * statistics.median(per_trial) if per_trial else 0.0,
        "storage_per_trial_p95_ms": 1e3 * pct(per_trial, 0.95),
        "storage_cpu_per_trial_mean_ms": 1e3 * statistics.fmean(cpu) if cpu else 0.0,
        "trial_wall_median_ms": 1e3 * statistics.median(wall) if wall else 0.0,
        "storage_share_of_cycle_median": statistics.median(cycle) if cycle else 0.0,
        "imports_s": imports_s,
        "ready_uss_mib": ready_uss,
        "timed_trials": len(per_trial),
        "heartbeat_thread_s": beat,
        "setup_storage_median_s": statistics.median(setup) if setup else 0.0,
        "workers_with_torch": torch_in,
        "peak_uss_mib": peak_uss,
        "peak_rss_one_process_mib": peak_rss,
        "row_lock_waits": (row_waits_after - row_waits_before)
        if row_waits_before is not None and row_waits_after is not None
        else None,
        "server": server,
        "poll_errors": poll.errors[:5],
        "logs": case_dir,
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--as-worker":
        _timed_cli(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--postgres", default=os.environ.get("LOADERSEARCH_TEST_POSTGRES"),
                    help="PostgreSQL URL (default $LOADERSEARCH_TEST_POSTGRES)")  # fmt: skip
    ap.add_argument("--mysql", default=os.environ.get("LOADERSEARCH_TEST_MYSQL"),
                    help="MySQL/MariaDB URL (default $LOADERSEARCH_TEST_MYSQL)")  # fmt: skip
    ap.add_argument("--workers", default="1,8,32,64", help="worker counts, comma-separated")
    ap.add_argument("--trials", type=int, default=200, help="the study's total")
    ap.add_argument("--timeout", type=float, default=900.0,
                    help="seconds one case may take; then every process is killed")  # fmt: skip
    ap.add_argument("--poll", type=float, default=0.5, help="server poll interval (s)")
    ap.add_argument("--json", default=None, help="write every case's figures here")
    ap.add_argument("--keep", action="store_true", help="keep the studies (default: deleted)")
    args = ap.parse_args()
    backends = [(b, u) for b, u in (("postgresql", args.postgres), ("mysql", args.mysql)) if u]
    if not backends:
        raise SystemExit("give --postgres URL and/or --mysql URL (a test database each)")

    from loadersearch.workload import make_dataset

    workdir = tempfile.mkdtemp(prefix="bench-shared-study-")
    data = os.path.join(workdir, "data")
    make_dataset(data, images=16, fmt="yolo", seed=7)
    print(f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}; logs in {workdir}")
    results = []
    for n in [int(x) for x in args.workers.split(",")]:
        for backend, url in backends:
            r = run_case(args, url, backend, n, data, workdir)
            results.append(r)
            s = r["server"]
            print(
                f"{backend} N={n}: {'ok' if r['ok'] else 'FAILED'} {r['checks']} "
                f"in {r['elapsed_s']:.0f} s; storage/trial mean "
                f"{r['storage_per_trial_mean_ms']:.0f} ms, median "
                f"{r['storage_per_trial_median_ms']:.0f} ms, p95 "
                f"{r['storage_per_trial_p95_ms']:.0f} ms, client CPU "
                f"{r['storage_cpu_per_trial_mean_ms']:.0f} ms, "
                f"{100 * r['storage_share_of_cycle_median']:.0f}% of the trial cycle "
                f"(trial wall median "
                f"{r['trial_wall_median_ms']:.0f} ms); connections max "
                f"{s['connections_max']:.0f}; lock waits max {s['lock_waits_max']:.0f} "
                f"({s['lock_wait_samples']:.0f} of {s['samples']:.0f} polls); RUNNING max "
                f"{s['running_max']:.0f}; surplus {r['surplus_fail']}; memory USS "
                f"{r['peak_uss_mib']:.0f} MiB; load {r['load_before'][0]:.1f}->"
                f"{r['load_after'][0]:.1f}",
                flush=True,
            )
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(results, f, indent=1)
    print()
    print("| backend | workers | checks | wall | storage/trial mean | median | p95 | client CPU |"
          " share of cycle | peak connections | lock waits (max, polls) | RUNNING max |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        s = r["server"]
        print(
            f"| {r['backend']} | {r['workers']} | {'ok' if r['ok'] else 'FAILED'} | "
            f"{r['elapsed_s']:.0f} s | {r['storage_per_trial_mean_ms']:.0f} ms | "
            f"{r['storage_per_trial_median_ms']:.0f} ms | {r['storage_per_trial_p95_ms']:.0f} ms"
            f" | {r['storage_cpu_per_trial_mean_ms']:.0f} ms | "
            f"{100 * r['storage_share_of_cycle_median']:.0f}% | {s['connections_max']:.0f} | "
            f"{s['lock_waits_max']:.0f}, {s['lock_wait_samples']:.0f}/{s['samples']:.0f} | "
            f"{s['running_max']:.0f} |"
        )


if __name__ == "__main__":
    main()
