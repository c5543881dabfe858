#!/usr/bin/env bash
# Creates .venv (when missing) and installs loadersearch into it. Idempotent and quiet when
# everything is already there. Usage: scripts/setup.sh [--test]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
extras=""
[ "${1:-}" = "--test" ] && extras="[test]"
stamp=".venv/.loadersearch-installed${extras:+-test}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing torch, torchvision and loadersearch$extras (first time: a few minutes)"
  .venv/bin/python -m pip install -q --upgrade pip
  # torch/torchvision pinned to a pair known to import together (CUDA build; runs on CPU too).
  .venv/bin/python -m pip install -q torch==2.14.1 torchvision==0.29.1
  .venv/bin/python -m pip install -q -e ".$extras"
  touch "$stamp"
fi
