#!/usr/bin/env bash
# GPU acceptance of `--gpus N` (issue 14): a DistributedDataParallel job, one rank per GPU, NCCL.
# Prints one PASS, FAIL or SKIP line per check and exits 1 if any check FAILs; each check's
# output is kept under $OUT/ddp/ when OUT is set (else under a temporary directory).
#
#   scripts/gpu_acceptance_ddp.sh                 # called by scripts/gpu_acceptance.sh
#   ACCEPT_DEVICE=cpu scripts/gpu_acceptance_ddp.sh   # the same checks with gloo CPU ranks
#                                                     # (tests this script without a GPU)
#
# With 2+ GPUs (about 3 minutes): real DDP training of YOLOv4-tiny on 2 GPUs under a VRAM cap
# (per-rank device, memory and NVML figures), the emulated device in lockstep over NCCL (2 ranks
# give ~2x one rank), a rank killed mid-trial (classified, nothing left on the host or the
# GPUs) and a 3-trial `loadersearch run --gpus 2` ending with the torchrun answer. With 1 GPU,
# the NCCL path with one rank (init, DDP on CUDA, barriers) and SKIP lines for the rest.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
DIR=${OUT:-$(mktemp -d)}/ddp
mkdir -p "$DIR"
DEVICE=${ACCEPT_DEVICE:-cuda}
export LOADERSEARCH_LOCK_DIR=${LOADERSEARCH_LOCK_DIR:-$DIR/locks}
export DIR DEVICE
failed=0

# check NAME COMMAND...: PASS with the command's last output line, FAIL with it otherwise.
check() {
  local name=$1
  shift
  "$@" >"$DIR/$name.log" 2>&1
  local code=$? last
  last=$(grep -v '^\s*$' "$DIR/$name.log" | tail -n 1)
  if [ $code -eq 0 ]; then
    echo "PASS ddp $name: $last"
  else
    echo "FAIL ddp $name: (exit $code) $last; see $DIR/$name.log"
    failed=1
  fi
}

if [ "$DEVICE" = cpu ]; then
  GPUS=2
else
  GPUS=$("$PY" -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
fi
if [ "$GPUS" -lt 1 ]; then
  echo "FAIL ddp devices: torch sees no CUDA device (ACCEPT_DEVICE=cpu tests this script on a CPU)"
  exit 1
fi
RANKS=$((GPUS >= 2 ? 2 : 1))
export RANKS

"$PY" -m loadersearch make-dataset "$DIR/data" --images 64 --format yolo --seed 0 \
  >"$DIR/make-dataset.log" 2>&1 || { echo "FAIL ddp dataset: see $DIR/make-dataset.log"; exit 1; }

# 1. Real DDP training: NCCL, rank r on cuda:r, the cap per device, per-rank figures.
check train "$PY" - <<'EOF'
import json, os, subprocess, sys

from loadersearch.config import LoaderConfig, MeasurePlan, WorkloadSpec

d, device, ranks = os.environ["DIR"], os.environ["DEVICE"], int(os.environ["RANKS"])
cap = 6 * 2**30
spec = WorkloadSpec(kind="train", data=f"{d}/data", device=device, vram_cap=cap, gpus=ranks)
config = LoaderConfig(num_workers=2, batch_size=16, pin_memory=device == "cuda")
plan = MeasurePlan(epochs=2, steps=8, windows_per_epoch=2, warmup_steps=4, timeout_s=240)
job = json.dumps({"workload": spec.to_dict(), "config": config.to_dict(), "plan": plan.to_dict()})
# The child with --ranks runs the multi-rank path even for one rank (the 1-GPU machine).
proc = subprocess.run(
    [sys.executable, "-m", "loadersearch.measure.child", "--fd", "1", "--spec", job,
     "--ranks", str(ranks)],
    capture_output=True, text=True, timeout=300,
)
msgs = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
open(f"{d}/train.json", "w").write(json.dumps(msgs, indent=1))
end = msgs[-1] if msgs else {"type": "none", "message": proc.stderr[-500:]}
if end["type"] != "result":
    sys.exit(f"no result: {end.get('reason')}: {end.get('message')}")
ready = next(m for m in msgs if m["type"] == "ready")
backend = "nccl" if device == "cuda" else "gloo"
assert ready["device"].startswith(f"{ranks} ranks ({backend})"), ready["device"]
assert [r["rank"] for r in end["ranks"]] == list(range(ranks)), end["ranks"]
for r in end["ranks"]:
    if device == "cuda":
        assert r["device"].startswith(f"cuda:{r['rank']} "), r["device"]
        assert 0 < r["peak_vram_bytes"] <= cap, r
        assert r["nvml_peak_bytes"], f"no NVML figure for rank {r['rank']}: {end['nvml']}"
    assert r["steady_rate"] > 0 and 0 <= r["wait_fraction"] <= 1, r
assert end["objective"] > 0 and len([m for m in msgs if m["type"] == "window"]) == 4
print(f"{ranks} rank(s) {backend}: {end['objective']:.1f} img/s, per rank "
      + ", ".join(f"{r['steady_rate']:.1f} img/s wait {r['wait_fraction']:.0%} VRAM "
                  f"{(r['peak_vram_bytes'] or 0) / 2**30:.2f} GiB" for r in end["ranks"]))
EOF

if [ "$RANKS" -lt 2 ]; then
  for name in lockstep rank-killed run; do
    echo "SKIP ddp $name: needs 2 GPUs, torch sees $GPUS"
  done
  exit $failed
fi

# 2. The emulated device in lockstep over NCCL: 2 ranks give ~2x one rank's rate when the
#    loader is not the limit (40 ms per image, 2 workers per rank).
check lockstep "$PY" - <<'EOF'
import os, sys

from loadersearch.config import LoaderConfig, MeasurePlan, WorkloadSpec
from loadersearch.measure import measure

d, device = os.environ["DIR"], os.environ["DEVICE"]
plan = MeasurePlan(epochs=2, steps=8, windows_per_epoch=2, warmup_steps=4, timeout_s=240)
config = LoaderConfig(num_workers=2, batch_size=8)
img = 416 if device == "cuda" else 64  # a CPU test machine decodes little: keep it light
rates = {}
for gpus in (1, 2, 1):
    spec = WorkloadSpec(kind="emulated", data=f"{d}/data", device=device, img_size=img,
                        emulated_ms=(0.0, 40.0), gpus=gpus)
    r = measure(spec, config, plan)
    if not r.ok:
        sys.exit(f"{gpus} rank(s): {r.status} ({r.reason}): {r.message}")
    rates.setdefault(gpus, []).append(r.steady_rate)
one = sum(rates[1]) / len(rates[1])
ratio = rates[2][0] / one
print(f"steady rate 1 rank {one:.1f} img/s, 2 ranks {rates[2][0]:.1f} img/s: x{ratio:.2f}")
if not 1.6 <= ratio <= 2.3:
    sys.exit(f"2 ranks gave x{ratio:.2f} one rank's rate, not ~2x")
EOF

# 3. A rank killed mid-trial ends the trial, classified by that rank; no process is left on
#    the host, and none of the measurement's processes holds GPU memory.
check rank-killed "$PY" - <<'EOF'
import os, signal, sys, time

import psutil

from loadersearch.config import LoaderConfig, MeasurePlan, WorkloadSpec
from loadersearch.measure import measure

d, device = os.environ["DIR"], os.environ["DEVICE"]
pids, killed = [], []

def kill_rank_1(window):
    if not pids:
        child = next(p for p in psutil.Process().children()
                     if "loadersearch.measure.child" in " ".join(p.cmdline()))
        pids.extend([child.pid] + [p.pid for p in child.children(recursive=True)])
        ranks = sorted(p.pid for p in child.children() if "spawn_main" in " ".join(p.cmdline()))
        os.kill(ranks[1], signal.SIGKILL)
        killed.append(ranks[1])
    return True

spec = WorkloadSpec(kind="train", data=f"{d}/data", device=device, gpus=2)
plan = MeasurePlan(epochs=3, steps=8, windows_per_epoch=4, warmup_steps=2, timeout_s=240)
r = measure(spec, LoaderConfig(num_workers=2, batch_size=8), plan, on_window=kill_rank_1)
if (r.status, r.reason) != ("infeasible", "killed") or not r.message.startswith("rank 1:"):
    sys.exit(f"classified {r.status} ({r.reason}): {r.message}")
deadline = time.monotonic() + 15
while [p for p in pids if psutil.pid_exists(p)] and time.monotonic() < deadline:
    time.sleep(0.2)
left = [p for p in pids if psutil.pid_exists(p)]
if left:
    sys.exit(f"processes left behind: {left}")
if device == "cuda":
    import pynvml

    pynvml.nvmlInit()
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        on_gpu = {p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)}
        if on_gpu & set(pids):
            sys.exit(f"GPU {i} still lists {sorted(on_gpu & set(pids))}")
print(f"{r.message[:90]}; {len(pids)} processes gone")
EOF

# 4. The whole search with 2 ranks ends with the per-rank answer and the torchrun line.
check run "$PY" - <<'EOF'
import os, subprocess, sys

d, device = os.environ["DIR"], os.environ["DEVICE"]
cmd = [sys.executable, "-m", "loadersearch", "run", "--gpus", "2", "--workload", "train",
       "--device", device, "--data", f"{d}/data", "--storage", f"sqlite:///{d}/ddp.db",
       "--trials", "3", "--confirm-rounds", "0", "--fix", "batch_size=16",
       "--epochs", "2", "--steps", "8"]
proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
open(f"{d}/run.out", "w").write(proc.stdout + proc.stderr)
if proc.returncode != 0:
    sys.exit(f"run exited {proc.returncode}: {(proc.stderr or proc.stdout)[-300:]}")
for wanted in ("DistributedSampler(dataset", "sampler=sampler",
               "torchrun --standalone --nproc_per_node=2", "per rank"):
    if wanted not in proc.stdout:
        sys.exit(f"the answer lacks {wanted!r}")
winner = next(line for line in proc.stdout.splitlines() if line.startswith("Winner"))
print(winner.strip())
EOF

exit $failed
