#!/usr/bin/env bash
# scripts/test.sh — the test command: set up (packages, StarPU build, cached outside the tree),
# build, and run every test with CTest (unit suites, multi-rank tests under mpiexec, trace test);
# then, in a build with CUDA on x86-64, the GPU check on the host emulation of a GPU
# (scripts/gpu-check.sh --emulated, build dir <build>-emu; its kernels part is left to CTest's
# cuda_kernels_emu tests). Extra arguments go to ctest, and then only CTest runs, e.g.
#   scripts/test.sh -R mpi_smoke
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
"$SZ_ROOT/scripts/setup.sh"
"$SZ_ROOT/scripts/build.sh"
sz_load_env
cd "$SZ_BUILD_DIR"
ctest --output-on-failure "$@"
if [ $# -eq 0 ] && grep -q '^SZ_USE_CUDA:BOOL=ON' CMakeCache.txt && [ "$(uname -m)" = x86_64 ]; then
    parts=d2_losses,d2_bf16_native,d2_fp16,llama_d2_losses,llama_d2_bf16_native,placement,gpu_arena,zero_fold,stages
    parts=$parts,stages_nccl,offload,pinned_fallback,budget,bench,mfu_target,shapes,sched_zero,sched_dmdas,sched_prio,sched_lws
    SZ_BUILD_DIR="$SZ_BUILD_DIR-emu" SZ_GPU_CHECK_PARTS=$parts SZ_GPU_CHECK_CMAKE_ARGS=-DSZ_BUILD_TESTS=OFF \
        SZ_GPU_CHECK_BUDGET_S=900 "$SZ_ROOT/scripts/gpu-check.sh" --emulated
fi
