#!/usr/bin/env bash
# A live check of the confirmation's race under a drift: a short emulated study on an idle
# machine, then a process spinning DUTY of one core (under the 25% busy share on 2 cores)
# from the moment the last trial finishes, so that only the confirmation runs beside it.
# What to read: the run's "confirmation: the rounds measured the finalists X% below their
# trials" notice, and the study's confirmation attribute (trial_drift, drift_said,
# race_noise). docs/measurement.md, "Live, stop 44", has the figures of two runs.
#
#   benchmarks/race_drift_live.sh [DUTY] [TRIALS] [extra run options]
#   benchmarks/race_drift_live.sh 0.3 14 --emulated-ms 1,0.5     # the loader sets the pace
set -euo pipefail
cd "$(dirname "$0")/.."
duty=${1:-0.3}; n=${2:-14}; shift $(( $# < 2 ? $# : 2 ))
out=$(mktemp -d); db=$out/drift.db
.venv/bin/loadersearch run --workload emulated --trials "$n" --no-settle --study drift \
  --storage "sqlite:///$db" "$@" > "$out/run.out" 2>&1 &
run=$!
finished() {
  sqlite3 "$db" "select count(*) from trials where state in ('COMPLETE','PRUNED')" 2>/dev/null \
    || echo 0
}
while kill -0 "$run" 2>/dev/null && [ "$(finished)" -lt "$n" ]; do sleep 1; done
echo "trials finished $(date -u +%T); a process spinning $duty of one core from now"
.venv/bin/python -c "
import time
while True:
    t = time.perf_counter()
    while time.perf_counter() - t < $duty * 0.1:
        pass
    time.sleep((1 - $duty) * 0.1)
" &
hog=$!
trap 'kill $hog 2>/dev/null || true' EXIT
code=0; wait "$run" || code=$?
grep -v "^trial " "$out/run.out"
echo "the study: sqlite:///$db (exit $code)"
exit "$code"
