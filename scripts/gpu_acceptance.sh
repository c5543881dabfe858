#!/usr/bin/env bash
# GPU acceptance: the CUDA path of loadersearch on a real GPU, in at most 8 minutes on one GPU
# (after the set-up). One PASS/FAIL/SKIP line per check; exit 1 when any check fails, 2 when
# there is no CUDA device (nothing could be checked), 0 when every check passed.
#
#   scripts/gpu_acceptance.sh            set up .venv (scripts/setup.sh --test), run the checks
#   scripts/gpu_acceptance.sh --dry-run  check the environment and print the checks, run none
#
#   GPU_ACCEPTANCE_PYTHON=/path/python   use that environment (loadersearch's dependencies
#                                        installed) instead of setting up .venv: for a machine
#                                        that cannot download torch
#   OUT=/some/dir                        also write the full log and the measurements' JSON
#                                        there (a GPU machine that collects $OUT brings them back)
#
# The checks: an uncapped `bench --workload train` at 416 px (device cuda:0, NVML peak and GPU
# utilisation present); a capped bench that passes, with the process's NVML peak under the cap;
# an over-cap batch that is infeasible with reason vram_cap (not a crash); the batch probe of a
# capped study; pinned batches really pinned; the AMP loss tests; a 16-worker measurement with a
# steady part; no process or GPU memory left behind (nvidia-smi --query-compute-apps); then
# every test marked `cuda`. Keep its output in docs/benchmarks/ when you run it.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DRY_RUN=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_acceptance: unknown option $arg (use --dry-run or --help)" >&2; exit 2 ;;
  esac
done

BUDGET_S=480 # 8 minutes for the checks themselves
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-acceptance.XXXXXX")
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  RESULTS=$OUT
else
  RESULTS=$WORK
fi
LOG=$RESULTS/gpu_acceptance.log
: >"$LOG"
SUMMARY=()
FAILED=0

say() { echo "$*" | tee -a "$LOG"; }
note() { echo "$*" >>"$LOG"; }

# -- environment --------------------------------------------------------------------------------
if [ -n "${GPU_ACCEPTANCE_PYTHON:-}" ]; then
  PY=$GPU_ACCEPTANCE_PYTHON
  say "environment: $PY (GPU_ACCEPTANCE_PYTHON; no set-up)"
else
  say "environment: scripts/setup.sh --test (.venv)"
  if ! scripts/setup.sh --test >>"$LOG" 2>&1; then
    say "FAIL setup: scripts/setup.sh failed (see $LOG); on a machine that cannot download, set"
    say "     GPU_ACCEPTANCE_PYTHON to a Python that has loadersearch's dependencies"
    exit 1
  fi
  PY=$ROOT/.venv/bin/python
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" # this checkout, whichever environment
export PYTHONUNBUFFERED=1
STORAGE="sqlite:///$WORK/acceptance.db"
DATA=$WORK/data
export PY ROOT RESULTS LOG STORAGE DATA # each check runs in its own bash, under `timeout`
ls_cli() { "$PY" -m loadersearch "$@"; }

if ! "$PY" -c "import loadersearch, optuna, pynvml, torch" >>"$LOG" 2>&1; then
  say "FAIL setup: $PY cannot import loadersearch and its dependencies (see $LOG)"
  exit 1
fi
CUDA_STATE=$("$PY" - 2>>"$LOG" <<'EOF'
import torch

from loadersearch.workload._device import cuda_available, cuda_unavailable_reason

if cuda_available():
    props = torch.cuda.get_device_properties(0)
    print(f"ok cuda:0 {props.name}, {props.total_memory / 2**30:.1f} GiB, torch {torch.__version__}")
else:
    print(f"none {cuda_unavailable_reason()}")
EOF
)
say "device: ${CUDA_STATE#* }"

# -- the checks ---------------------------------------------------------------------------------
# Each check is a function that prints what it measured and returns non-zero with a last line
# saying why when it fails; bench results are kept as JSON in $RESULTS.

bench_json() { # NAME ARGS...: loadersearch bench --json, result in $RESULTS/NAME.json
  local name=$1
  shift
  ls_cli bench --json --data "$DATA" "$@" >"$RESULTS/$name.json" 2>>"$LOG"
  echo "exit $?"
}

expect() { # NAME.json PYTHON-ASSERTIONS (r = the result dict): prints the failed assertion
  "$PY" - "$RESULTS/$1" "$2" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"status {r['status']} reason {r['reason']} device {r['device']} objective "
      f"{r['objective']:.1f} img/s; peaks allocated {r.get('peak_allocated_bytes')} reserved "
      f"{r.get('peak_reserved_bytes')} nvml {r.get('nvml_peak_bytes')}; outside the allocator "
      f"{r.get('cuda_overhead_bytes')}; fraction {r.get('memory_fraction')}; util "
      f"{r.get('gpu_util_mean')}; notes {r.get('notes')}; message {r.get('message')!r}")
for line in sys.argv[2].strip().splitlines():
    if not eval(line.strip(), {"r": r}):
        print(f"why: not true: {line.strip()}")
        sys.exit(1)
EOF
}

check_dataset() {
  ls_cli make-dataset "$DATA" --images 512 >>"$LOG" 2>&1 || { echo "why: make-dataset failed"; return 1; }
  echo "512 generated VOC-like images in $DATA"
}

check_train_uncapped() {
  bench_json train_uncapped --workload train --img-size 416 --batch-size 32 --num-workers 8 \
    --pin-memory --epochs 2 --steps 8 --windows-per-epoch 2 --warmup-steps 4
  expect train_uncapped.json '
    r["status"] == "ok"
    r["device"].startswith("cuda:0")
    r["img_size"] == 416
    r["nvml"] == "ok" and (r["nvml_peak_bytes"] or 0) > 0
    r["gpu_util_mean"] is not None
    0 < r["peak_allocated_bytes"] <= r["peak_reserved_bytes"]
    r["config"]["start_method"] == "fork"'
}

check_train_capped() {
  bench_json train_capped --workload train --img-size 416 --batch-size 16 --num-workers 4 \
    --vram-cap 6GiB --epochs 1 --steps 8 --windows-per-epoch 2 --warmup-steps 4
  expect train_capped.json '
    r["status"] == "ok"
    r["cuda_overhead_bytes"] is not None and r["cuda_overhead_bytes"] > 0
    r["memory_fraction"] is not None
    r["peak_reserved_bytes"] + r["cuda_overhead_bytes"] <= 6 * 2**30
    r["nvml_peak_bytes"] is None or r["nvml_peak_bytes"] <= 6 * 2**30'
}

check_over_cap() {
  bench_json over_cap --workload train --img-size 416 --batch-size 256 --vram-cap 2GiB \
    --epochs 1 --steps 2 --windows-per-epoch 1 --warmup-steps 2
  expect over_cap.json '
    r["status"] == "infeasible" and r["reason"] == "vram_cap"
    "over the VRAM cap" in r["message"] or "leaves nothing for tensors" in r["message"]'
}

check_batch_probe() {
  ls_cli run --workload train --data "$DATA" --vram-cap 4GiB --space batch_size=pow2:8:256 \
    --trials 1 --confirm-rounds 0 --no-baselines --epochs 1 --steps 4 --windows-per-epoch 1 \
    --warmup-steps 2 --storage "$STORAGE" --study probe --quiet >>"$LOG" 2>&1 ||
    { echo "why: loadersearch run exited $?"; return 1; }
  "$PY" - "$STORAGE" "$RESULTS/probe.json" <<'EOF'
import json, sys
import optuna
probe = optuna.load_study(study_name="probe", storage=sys.argv[1]).user_attrs["probe"]
json.dump(probe, open(sys.argv[2], "w"), indent=2)
print("probed (batch, fits, allocated peak):",
      [(p["batch"], p["fits"], p.get("peak_allocated_bytes")) for p in probe["probes"]],
      "max_batch", probe["max_batch"])
if not probe["max_batch"]:
    sys.exit(print("why: no batch fits"))
for p in probe["probes"]:
    limit = 4 * 2**30 - (p.get("cuda_overhead_bytes") or 0)
    if p["fits"] and not p["peak_allocated_bytes"] <= 0.9 * limit:
        sys.exit(print(f"why: batch {p['batch']} fits without 10% headroom"))
    if not p["fits"] and p["reason"] not in ("vram_cap", None):
        sys.exit(print(f"why: batch {p['batch']} failed for another reason: {p['reason']}"))
EOF
}

check_pinned() {
  "$PY" - <<'EOF'
from loadersearch.config import LoaderConfig, MeasurePlan, WorkloadSpec
from loadersearch.measure._loop import ShortEpochSampler, make_loader
from loadersearch.workload import create_workload
import os
w = create_workload(WorkloadSpec(kind="loader", device="cuda", data=os.environ["DATA"]))
for workers in (0, 2):
    config = LoaderConfig(num_workers=workers, batch_size=8, pin_memory=True)
    loader = make_loader(w, config, ShortEpochSampler(len(w.dataset), 16, 0))
    for batch in loader:
        if not all(t.is_pinned() for t in batch):
            raise SystemExit(print(f"why: a batch tensor is not pinned with {workers} workers"))
print("every tensor of every batch is page-locked, with 0 and 2 workers")
EOF
}

check_amp_loss() {
  "$PY" -m pytest -q -m cuda tests/workload/test_loss.py -p no:cacheprovider 2>&1
}

check_16_workers() {
  # The plan's 8 steps, sized to the configuration: 2 x 16 x 2 + 16 = 80 steps per epoch
  # (fewer only if the epoch time limit cut them, which the notes would say).
  bench_json workers16 --workload loader --num-workers 16 --batch-size 8 --prefetch-factor 2 \
    --epochs 2 --steps 8 --windows-per-epoch 4 --warmup-steps 4
  expect workers16.json '
    r["status"] == "ok" and r["device"].startswith("cuda:0")
    r["steady_rate"] > 0 and r["epoch_steps"] >= 3 * 16
    not any("too few to separate the steady rate" in n for n in r["notes"])'
}

check_nothing_left() {
  local apps left i
  command -v nvidia-smi >/dev/null || { echo "why: nvidia-smi is not on PATH"; return 1; }
  for i in $(seq 1 20); do # the measurements' process groups are killed; give them a moment
    apps=$(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader \
      2>&1 | tr '\n' ' ')
    # "[-]m": a pattern that does not match this check's own command line
    left=$(pgrep -f "[-]m loadersearch.measure._child" | tr '\n' ' ' || true)
    apps=${apps% } left=${left% }
    [ -z "$apps" ] && [ -z "$left" ] && break
    sleep 0.5
  done
  echo "nvidia-smi compute apps: ${apps:-none}; measuring processes: ${left:-none}"
  [ -z "$apps" ] || { echo "why: a process still holds GPU memory"; return 1; }
  [ -z "$left" ] || { echo "why: measuring processes are still running"; return 1; }
}

check_cuda_tests() {
  "$PY" -m pytest -q -m cuda tests --deselect tests/workload/test_loss.py -p no:cacheprovider 2>&1
}

CHECKS=(
  "dataset:60:check_dataset"
  "bench train 416 uncapped:90:check_train_uncapped"
  "bench train 416 capped 6GiB:75:check_train_capped"
  "over-cap batch is infeasible (vram_cap):60:check_over_cap"
  "batch probe under a 4GiB cap:120:check_batch_probe"
  "pinned batches are pinned:45:check_pinned"
  "AMP loss tests (cuda-marked):45:check_amp_loss"
  "16 workers with a steady part:75:check_16_workers"
  "no process or GPU memory left:15:check_nothing_left"
  "tests marked cuda:120:check_cuda_tests"
)

if [ "$DRY_RUN" = 1 ]; then
  for spec in "${CHECKS[@]}"; do
    IFS=: read -r name limit fn <<<"$spec"
    say "DRY-RUN $name (at most ${limit} s): $fn"
  done
  ls_cli bench --help >/dev/null 2>>"$LOG" || { say "FAIL the CLI does not start"; exit 1; }
  say "dry run: the environment imports, the CLI starts; no check was run (log: $LOG)"
  exit 0
fi

if [ "${CUDA_STATE%% *}" != ok ]; then
  for spec in "${CHECKS[@]}"; do
    IFS=: read -r name limit fn <<<"$spec"
    say "SKIP $name: no CUDA device"
  done
  say "RESULT: no CUDA device (${CUDA_STATE#* }): nothing was checked (log: $LOG)"
  exit 2
fi

START=$SECONDS
for spec in "${CHECKS[@]}"; do
  IFS=: read -r name limit fn <<<"$spec"
  left=$((BUDGET_S - (SECONDS - START)))
  if [ "$left" -lt 10 ]; then
    say "FAIL $name: the 8-minute budget is spent"
    SUMMARY+=("FAIL $name: the 8-minute budget is spent")
    FAILED=1
    continue
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  note "---- $name ($fn, at most ${limit} s)"
  t0=$SECONDS
  out=$(timeout --signal=TERM --kill-after=10 "$limit" bash -c "$(declare -f); $fn" 2>&1)
  rc=$?
  note "$out"
  detail=$(echo "$out" | grep -v '^why: ' | tail -1)
  why=$(echo "$out" | grep '^why: ' | tail -1)
  if [ "$rc" = 0 ]; then
    SUMMARY+=("PASS $name")
    say "PASS $name ($((SECONDS - t0)) s): $detail"
  else
    [ "$rc" = 124 ] && why="why: timed out after ${limit} s"
    SUMMARY+=("FAIL $name: ${why#why: }")
    msg=${why#why: }
    [ -n "$detail" ] && msg="${msg:+$msg; }$detail"
    say "FAIL $name ($((SECONDS - t0)) s): $msg"
    FAILED=1
  fi
done
# The several-GPU checks (--gpus N: one DDP rank per GPU, NCCL); on one GPU, its one-rank NCCL
# check only (~1-2 min). GPU_ACCEPTANCE_DDP=0 leaves them out.
if [ "${GPU_ACCEPTANCE_DDP:-1}" != 0 ]; then
  note "---- several GPUs: scripts/gpu_acceptance_ddp.sh"
  ddp_out=$(PY=$PY OUT=${OUT:-} scripts/gpu_acceptance_ddp.sh 2>&1)
  ddp_rc=$?
  note "$ddp_out"
  while IFS= read -r line; do
    case "$line" in
      PASS* | FAIL* | SKIP*) SUMMARY+=("ddp: $line"); say "ddp: $line" ;;
    esac
  done <<<"$ddp_out"
  [ "$ddp_rc" = 1 ] && FAILED=1
fi
say "---- summary"
for line in "${SUMMARY[@]}"; do say "$line"; done
say "RESULT: $([ $FAILED = 0 ] && echo PASS || echo FAIL) in $((SECONDS - START)) s (log: $LOG)"
exit $FAILED
