#!/usr/bin/env bash
# scripts/build.sh — configure and build StarZeRO (library, apps, tests) in $SZ_BUILD_DIR (default
# ./build) against the StarPU chosen by scripts/setup.sh. Extra arguments go to cmake, e.g.
#   scripts/build.sh -DSZ_SANITIZE=address,undefined
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
sz_load_env
# A different StarPU than the one this build tree was configured with: configure afresh.
stamp="$SZ_BUILD_DIR/.sz-starpu"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "${SZ_STARPU_HOME:-system}" ]; then
    rm -rf "$SZ_BUILD_DIR/CMakeCache.txt" "$SZ_BUILD_DIR/CMakeFiles"
fi
mkdir -p "$SZ_BUILD_DIR"
echo "${SZ_STARPU_HOME:-system}" >"$stamp"
cmake -S "$SZ_ROOT" -B "$SZ_BUILD_DIR" -DCMAKE_BUILD_TYPE="${SZ_BUILD_TYPE:-Release}" "$@" >"$SZ_ROOT/.cmake.log" 2>&1 \
    || { cat "$SZ_ROOT/.cmake.log"; sz_die "cmake configure failed"; }
cmake --build "$SZ_BUILD_DIR" -j"$(nproc)"
