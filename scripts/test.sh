#!/usr/bin/env bash
# scripts/test.sh — the test command: set up (packages, StarPU build, cached outside the tree),
# build, and run every test with CTest (unit suites, multi-rank tests under mpiexec, trace test).
# Extra arguments go to ctest, e.g.  scripts/test.sh -R mpi_smoke
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
"$SZ_ROOT/scripts/setup.sh"
"$SZ_ROOT/scripts/build.sh"
sz_load_env
cd "$SZ_BUILD_DIR"
ctest --output-on-failure "$@"
