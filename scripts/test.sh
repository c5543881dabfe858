#!/usr/bin/env bash
# Set up (with test extras) and run the test suite. Server-backed storage tests run when
# LOADERSEARCH_TEST_POSTGRES / LOADERSEARCH_TEST_MYSQL hold URLs (.ci/run sets them).
# --fast: only the tests that start no measuring process (-m "not slow"; docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
lane=()
if [ "${1:-}" = "--fast" ]; then shift; lane=(-m "not slow"); fi
scripts/setup.sh --test
.venv/bin/ruff check loadersearch tests scripts benchmarks examples
(site=$(mktemp -d); trap 'rm -rf "$site"' EXIT; NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict -d "$site")
# Two test processes (pytest-xdist): most tests wait on the processes they start, so one
# process leaves a CPU idle; LOADERSEARCH_TEST_PROCESSES=0 runs them in this one.
exec .venv/bin/python -m pytest -q -n "${LOADERSEARCH_TEST_PROCESSES:-2}" --dist loadgroup \
  "${lane[@]}" "$@"
