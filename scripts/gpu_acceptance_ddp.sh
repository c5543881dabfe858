#!/usr/bin/env bash
# GPU acceptance of `--gpus N` (issue 14): a DistributedDataParallel job, one rank per GPU, NCCL,
# in at most 5 minutes on 2 GPUs. Same conventions as scripts/gpu_acceptance.sh, which calls it:
# one PASS/FAIL/SKIP line per check; exit 1 when any check fails, 2 when there is no CUDA device
# (nothing could be checked), 0 otherwise.
#
#   scripts/gpu_acceptance_ddp.sh             run the checks (with the environment below)
#   scripts/gpu_acceptance_ddp.sh --dry-run   print the checks, run none
#
#   PY or GPU_ACCEPTANCE_PYTHON=/path/python  the Python to use (gpu_acceptance.sh exports PY);
#                                             default .venv/bin/python
#   OUT=/some/dir                             also keep the log and each check's JSON in
#                                             $OUT/ddp (a GPU machine that collects $OUT brings
#                                             them back)
#   ACCEPT_DEVICE=cpu                         the same checks with gloo CPU ranks: tests this
#                                             script on a machine without a GPU
#
# With 2+ GPUs: real DDP training of YOLOv4-tiny on 2 GPUs under a 6 GiB cap per device (rank r
# on cuda:r, NCCL, per-rank peaks under the cap, NVML figures); the emulated device in lockstep
# over NCCL (2 ranks give 1.6-2.3x one rank); a rank killed mid-trial (classified "rank 1: ...",
# no process left on the host or in any GPU's process list); a 3-trial `loadersearch run --gpus
# 2` ending with the DistributedSampler/DataLoader/torchrun answer. With 1 GPU: the NCCL path
# with one rank (process group, DDP on CUDA, barriers, the cap), SKIP for the rest.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DRY_RUN=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    -h | --help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_acceptance_ddp: unknown option $arg (use --dry-run or --help)" >&2; exit 2 ;;
  esac
done

PY=${PY:-${GPU_ACCEPTANCE_PYTHON:-$ROOT/.venv/bin/python}}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-acceptance-ddp.XXXXXX")
RESULTS=${OUT:+$OUT/ddp}
RESULTS=${RESULTS:-$WORK}
mkdir -p "$RESULTS"
LOG=$RESULTS/gpu_acceptance_ddp.log
: >"$LOG"
DEVICE=${ACCEPT_DEVICE:-cuda}
DATA=$WORK/data
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export LOADERSEARCH_LOCK_DIR=${LOADERSEARCH_LOCK_DIR:-$WORK/locks}
export PY RESULTS DEVICE DATA WORK
FAILED=0

say() { echo "$*" | tee -a "$LOG"; }

# -- the checks: each prints what it measured, its last line "why: ..." when it fails ---------

check_dataset() {
  "$PY" -m loadersearch make-dataset "$DATA" --images 128 --seed 0 >>"$RESULTS/dataset.log" 2>&1 ||
    { echo "why: make-dataset failed"; return 1; }
  echo "128 generated VOC-like images in $DATA"
}

check_train() { # RANKS: real DDP training; the child's --ranks runs the DDP path even for 1
  "$PY" - "$1" <<'EOF'
import json, os, subprocess, sys

from loadersearch.config import LoaderConfig, MeasurePlan, WorkloadSpec

ranks, device, results = int(sys.argv[1]), os.environ["DEVICE"], os.environ["RESULTS"]
cap = 6 * 2**30
spec = WorkloadSpec(kind="train", data=os.environ["DATA"], device=device, vram_cap=cap,
                    gpus=ranks)
config = LoaderConfig(num_workers=2, batch_size=16, pin_memory=device == "cuda")
plan = MeasurePlan(epochs=2, steps=8, windows_per_epoch=2, warmup_steps=4, timeout_s=150)
job = json.dumps({"workload": spec.to_dict(), "config": config.to_dict(), "plan": plan.to_dict()})
proc = subprocess.run(
    [sys.executable, "-m", "loadersearch.measure._child", "--fd", "1", "--spec", job,
     "--ranks", str(ranks)],
    capture_output=True, text=True, timeout=170,
)
msgs = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
json.dump(msgs, open(f"{results}/train.json", "w"), indent=1)
end = msgs[-1] if msgs else {"type": "none", "message": proc.stderr[-300:]}
if end["type"] != "result":
    sys.exit(print(f"why: no result: {end.get('reason')}: {end.get('message')}"))
ready = next(m for m in msgs if m["type"] == "ready")
backend = "nccl" if device == "cuda" else "gloo"
print(f"{ready['device']}: {end['objective']:.1f} img/s; per rank "
      + ", ".join(f"{r['steady_rate']:.1f} img/s wait {r['wait_fraction']:.0%} reserved "
                  f"{(r.get('peak_reserved_bytes') or 0) / 2**30:.2f} GiB + outside "
                  f"{(r.get('cuda_overhead_bytes') or 0) / 2**30:.2f} GiB" for r in end["ranks"]))
checks = [
    (ready["device"].startswith(f"{ranks} ranks ({backend})"), "the job's device label"),
    ([r["rank"] for r in end["ranks"]] == list(range(ranks)), "one entry per rank"),
    (end["objective"] > 0, "a positive objective"),
]
for r in end["ranks"] if device == "cuda" else []:
    n = r["rank"]
    checks += [
        (r["device"].startswith(f"cuda:{n} "), f"rank {n} on cuda:{n}"),
        (r["peak_reserved_bytes"] + (r["cuda_overhead_bytes"] or 0) <= cap,
         f"rank {n} under the 6 GiB cap"),
        ((r["nvml_peak_bytes"] or 0) > 0, f"rank {n} has an NVML figure"),
    ]
for ok, what in checks:
    if not ok:
        sys.exit(print(f"why: not true: {what}"))
EOF
}

check_lockstep() { # 2 ranks ~2x one rank when the loader is not the limit (40 ms per image)
  "$PY" - <<'EOF'
import os, sys

from loadersearch.config import LoaderConfig, MeasurePlan, WorkloadSpec
from loadersearch.measure import measure

device = os.environ["DEVICE"]
plan = MeasurePlan(epochs=2, steps=8, windows_per_epoch=2, warmup_steps=4, timeout_s=150)
config = LoaderConfig(num_workers=2, batch_size=8)
img = 416 if device == "cuda" else 64  # a CPU test machine decodes little: keep it light
rates = {}
for gpus in (1, 2, 1):
    spec = WorkloadSpec(kind="emulated", data=os.environ["DATA"], device=device, img_size=img,
                        emulated_ms=(0.0, 40.0), gpus=gpus)
    r = measure(spec, config, plan)
    if not r.ok:
        sys.exit(print(f"why: {gpus} rank(s): {r.status} ({r.reason}): {r.message}"))
    rates.setdefault(gpus, []).append(r.steady_rate)
one = sum(rates[1]) / len(rates[1])
ratio = rates[2][0] / one
print(f"steady rate 1 rank {one:.1f} img/s, 2 ranks {rates[2][0]:.1f} img/s: x{ratio:.2f}")
if not 1.6 <= ratio <= 2.3:
    sys.exit(print(f"why: 2 ranks gave x{ratio:.2f} one rank's rate, not ~2x"))
EOF
}

check_rank_killed() { # a rank killed mid-trial: classified by it, nothing left behind
  "$PY" - <<'EOF'
import os, signal, sys, time

import psutil

from loadersearch.config import LoaderConfig, MeasurePlan, WorkloadSpec
from loadersearch.measure import measure

device = os.environ["DEVICE"]
pids = []

def kill_rank_1(window):
    if not pids:
        child = next(p for p in psutil.Process().children()
                     if "loadersearch.measure._child" in " ".join(p.cmdline()))
        pids.extend([child.pid] + [p.pid for p in child.children(recursive=True)])
        ranks = sorted(p.pid for p in child.children() if "spawn_main" in " ".join(p.cmdline()))
        os.kill(ranks[1], signal.SIGKILL)
    return True

spec = WorkloadSpec(kind="train", data=os.environ["DATA"], device=device, gpus=2)
plan = MeasurePlan(epochs=3, steps=8, windows_per_epoch=4, warmup_steps=2, timeout_s=150)
r = measure(spec, LoaderConfig(num_workers=2, batch_size=8), plan, on_window=kill_rank_1)
print(f"{r.status} ({r.reason}): {r.message[:100]}")
if (r.status, r.reason) != ("infeasible", "killed") or not r.message.startswith("rank 1:"):
    sys.exit(print("why: not classified as rank 1 killed"))
deadline = time.monotonic() + 15
while [p for p in pids if psutil.pid_exists(p)] and time.monotonic() < deadline:
    time.sleep(0.2)
left = [p for p in pids if psutil.pid_exists(p)]
if left:
    sys.exit(print(f"why: processes left behind: {left}"))
if device == "cuda":
    import pynvml

    pynvml.nvmlInit()
    for i in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(i)
        on_gpu = {p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)}
        if on_gpu & set(pids):
            sys.exit(print(f"why: GPU {i} still lists {sorted(on_gpu & set(pids))}"))
print(f"the launcher, 2 ranks and their workers ({len(pids)} processes) are gone")
EOF
}

check_run() { # the whole search with 2 ranks ends with the per-rank answer and torchrun
  "$PY" -m loadersearch run --gpus 2 --workload train --device "$DEVICE" --data "$DATA" \
    --storage "sqlite:///$WORK/ddp.db" --trials 3 --confirm-rounds 0 --fix batch_size=16 \
    --epochs 2 --steps 8 >"$RESULTS/run.out" 2>&1 ||
    { echo "why: loadersearch run exited $?"; return 1; }
  local wanted
  for wanted in "sampler = DistributedSampler(dataset" "DataLoader(dataset, sampler=sampler" \
    "torchrun --standalone --nproc_per_node=2" "num_workers and batch_size are per rank"; do
    grep -qF "$wanted" "$RESULTS/run.out" || { echo "why: the output lacks: $wanted"; return 1; }
  done
  grep '^Winner' "$RESULTS/run.out"
}

# name:limit_s:function[:arguments]; the 2-GPU checks need 2 devices
CHECKS=(
  "dataset:60:check_dataset"
  "ddp train, NCCL, 6 GiB cap per device:180:check_train"
  "ddp emulated lockstep, 2 ranks ~2x one:150:check_lockstep:2"
  "ddp rank killed mid-trial, nothing left:90:check_rank_killed:2"
  "ddp run --gpus 2 answers with torchrun:240:check_run:2"
)

if [ "$DRY_RUN" = 1 ]; then
  for spec in "${CHECKS[@]}"; do
    IFS=: read -r name limit fn need <<<"$spec"
    say "DRY-RUN $name (at most ${limit} s): $fn${need:+ (needs $need GPUs)}"
  done
  exit 0
fi

if [ "$DEVICE" = cpu ]; then
  GPUS=2
  say "device: CPU ranks with gloo (ACCEPT_DEVICE=cpu): a test of this script"
else
  GPUS=$("$PY" -c "import torch; print(torch.cuda.device_count())" 2>>"$LOG" || echo 0)
  if [ "${GPUS:-0}" -lt 1 ]; then
    for spec in "${CHECKS[@]}"; do say "SKIP ${spec%%:*}: no CUDA device"; done
    say "RESULT ddp: no CUDA device: nothing was checked (log: $LOG)"
    exit 2
  fi
  say "device: $GPUS CUDA device(s)"
fi
RANKS=$((GPUS >= 2 ? 2 : 1))

START=$SECONDS
for spec in "${CHECKS[@]}"; do
  IFS=: read -r name limit fn need <<<"$spec"
  if [ -n "$need" ] && [ "$GPUS" -lt "$need" ]; then
    say "SKIP $name: needs $need GPUs, torch sees $GPUS"
    continue
  fi
  arg=""
  [ "$fn" = check_train ] && arg=$RANKS
  [ "$DEVICE" = cpu ] && limit=$((limit * 4)) # CPU training: slow, and no GPU time to save
  t0=$SECONDS
  out=$(timeout --signal=TERM --kill-after=10 "$limit" bash -c "$(declare -f); $fn $arg" 2>&1)
  rc=$?
  echo "---- $name ($fn $arg)" >>"$LOG"
  echo "$out" >>"$LOG"
  detail=$(echo "$out" | grep -v '^why: ' | grep -v '^\s*$' | tail -1)
  why=$(echo "$out" | grep '^why: ' | tail -1)
  if [ "$rc" = 0 ]; then
    say "PASS $name ($((SECONDS - t0)) s): $detail"
  else
    [ "$rc" = 124 ] && why="why: timed out after ${limit} s"
    msg=${why#why: }
    [ -n "$detail" ] && msg="${msg:+$msg; }$detail"
    say "FAIL $name ($((SECONDS - t0)) s): $msg"
    FAILED=1
  fi
done
say "RESULT ddp: $([ $FAILED = 0 ] && echo PASS || echo FAIL) in $((SECONDS - START)) s (log: $LOG)"
exit $FAILED
