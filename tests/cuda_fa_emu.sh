#!/usr/bin/env bash
# tests/cuda_fa_emu.sh — builds tests/cuda_fa_emu.cpp (the tiled CUDA attention kernels emulated on
# the host, see there) with the host C++ compiler and the CUDA toolkit's headers (cuda_bf16.h for
# __nv_bfloat16) and runs it. Exits 77 (skipped) without a C++20 compiler or the CUDA headers.
# Usage: cuda_fa_emu.sh BUILD_DIR
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
out="${1:-$root/build}/cuda_fa_emu"
cxx="${CXX:-g++}"
inc=""
for d in "${CUDA_HOME:-/usr/local/cuda}/include" /usr/local/cuda/include /usr/include; do
    [ -f "$d/cuda_bf16.h" ] && { inc="$d"; break; }
done
command -v "$cxx" >/dev/null 2>&1 || { echo "skipped: no $cxx"; exit 77; }
[ -n "$inc" ] || { echo "skipped: no cuda_bf16.h (CUDA toolkit headers)"; exit 77; }
if ! "$cxx" -std=c++20 -O1 -w -I"$inc" -I"$root/codelets/kernels/cuda" "$here/cuda_fa_emu.cpp" -o "$out" -lpthread; then
    echo "cuda_fa_emu.cpp did not compile with $cxx -std=c++20"
    exit 1
fi
"$out"
