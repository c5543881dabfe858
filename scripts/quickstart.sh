#!/usr/bin/env bash
# Quick start: set up, then search the DataLoader settings on the built-in dataset.
# Any arguments are passed to `loadersearch run` (default: --trials 40).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
[ $# -gt 0 ] || set -- --trials 40
exec .venv/bin/loadersearch run "$@"
