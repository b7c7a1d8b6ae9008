#!/usr/bin/env bash
# scripts/demo.sh — the main job: set up, build, then show what StarZeRO sees on 2 MPI ranks
# (topology, each rank's core share, StarPU workers, memory nodes, build features).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
"$SZ_ROOT/scripts/setup.sh"
"$SZ_ROOT/scripts/build.sh" >/dev/null
sz_load_env
# shellcheck disable=SC2046
exec mpirun $(sz_mpirun_flags) -np "${SZ_DEMO_RANKS:-2}" "$SZ_BUILD_DIR/sz-info"
