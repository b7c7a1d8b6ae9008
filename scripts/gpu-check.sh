#!/usr/bin/env bash
# scripts/gpu-check.sh — the GPU verification in one command (issue 15, part 6). Builds StarZeRO
# with CUDA (build dir $SZ_BUILD_DIR, default ./build-gpu) and runs, on whatever GPUs the machine
# has, each part below; prints one JSON line per part: {"part": ..., "result": "pass"|"fail"|
# "skip"|"not implemented", ...figures}. Logs go to $SZ_GPU_LOG (default <build>/gpu-check-logs).
# Without a GPU it says so and exits 77; otherwise it exits 1 if any part failed, else 0.
# Budget: under 8 minutes on one H100/H200-class GPU (each part has its own timeout, and the whole
# check stops starting parts once SZ_GPU_CHECK_BUDGET_S, default 470 s, has passed: the parts not
# run then say "skip" with that reason). Every run is under `timeout -k 10` (a process stuck in
# the driver that ignores SIGTERM is killed 10 s later), every way out prints the "total" line, and
# SZ_GPU_CHECK_OUT=DIR packs the logs into DIR/gpu-check-logs.tgz (one file) at the end.
#
#   prereq     what the build needs, before it starts: cmake, pkg-config, mpiexec, nvcc, hwloc and
#              cJSON (pkg-config), and a StarPU built WITH CUDA at $SZ_DEPS_DIR/starpu.env (scripts/
#              setup.sh: it needs apt and the network, so a bare machine cannot make one); a "fail"
#              names what is missing and ends the check (the build would fail anyway).
#              With --bundle, what the bundle needs instead, checked before the GPU is looked for:
#              it unpacks; the machine's glibc is at least the one the bundle needs (both figures);
#              the CPU has the features of the bundle's -march; every bundled program, Open MPI
#              program and plugin finds all its libraries (ldd: each "not found" named, the CUDA
#              ones included); the bundle's mpiexec starts a process. A "fail" ends the check
#   build      scripts/build.sh with CUDA and -Werror for the GPU's own architecture (native); a
#              failure prints the end of the build log. With --bundle no build: "from": "bundle",
#              with the commit the bundle was built from, its CUDA architectures and -march
#   kernels    every CUDA kernel against its CPU twin (tests/test_cuda_kernels)
#   attention_bench  figures, not judged on speed: the tiled (FlashAttention-2, bf16 tensor-core)
#              and the rowwise CUDA attention at GPT-2 124M's shape (B8 T1024 NH12 hs64, the native
#              bf16 path's operands): fwd/bwd ms and TFLOP/s (test_cuda_kernels --bench-attention);
#              "pass" when both ran
#   d2_losses  a d2 model, 1 GPU (STARPU_NCUDA=1) against the CPU-only run: fp32 losses within 1e-4,
#              and the GPU run must have executed tasks on a CUDA worker (STARPU_WORKER_STATS)
#   d2_bf16_native  the d2 model under --precision bf16 on 1 GPU with --bf16-compute auto (the GPU
#              rule: native on sm_80+ once every op has its bf16 CUDA twin, codelets/native_cuda.c)
#              against the CPU-only native run (STARPU_NCUDA=0 --bf16-compute native): the GPU run
#              must report bf16_path native and have run CUDA tasks, and its losses be within 2e-2
#              relative of the CPU's at every step (a bf16 tolerance: one bf16 ulp is 2^-8 = 3.9e-3
#              relative, and the two paths round their bf16 activations from sums taken in other
#              orders, which the training steps compound; tests/bf16_native_cli.sh bounds native
#              against fp32 by 0.05 over 8 steps); cpu_tasks (a figure, not judged) says whether
#              any task of the native run fell to a CPU worker
#   d2_fp16    the d2 model under --precision fp16 (fp16 parameters and gradients, fp32 master and
#              Adam state, dynamic loss scaling) on 1 GPU against the CPU-only fp16 run, 16 steps with
#              a forced overflow (--initial-scale-power 24, --loss-scale-window 2): the loss scale and
#              the skipped flag of every step equal to the CPU's (the same steps skipped: 9 while the
#              scale falls from 2^24 to 2^16, then a doubling that overflows again), at least 2
#              skipped and 4 applied, the losses within 1e-3 relative (fp16 parameters: a master
#              value that differs from the CPU's by rounding can round to the neighbouring fp16, up
#              to 2^-10 relative away; on the emulated GPU: 0), and CUDA tasks run; cpu_tasks a
#              figure (0: the conversions, the optimizer, the norms and the clip factor with the loss
#              scale all ran on the GPU)
#   llama_d2_losses, llama_d2_bf16_native  the same two for the LLaMA-style model (--arch llama,
#              config d2: RMSNorm and its residual fusion, RoPE, SwiGLU, all with CUDA twins): fp32
#              losses within 1e-4 of the CPU-only run; bf16 (--bf16-compute auto on the GPU: must
#              pick native) within 2e-2 of the CPU's native path; cpu_tasks a figure (0 when every
#              op ran on the GPU)
#   placement  on that d2 GPU run, the zero policy left every task to the CUDA worker (CPU tasks: 0)
#   zero_fold  the d2 GPU run (zero folding on: the default) against SZ_ZERO_FOLD=0 on the GPU:
#              losses bitwise equal reported, within 1e-6 required (cuBLAS's beta 0 may take another kernel)
#   gpu_arena  the d2 GPU run with SZ_GPU_ARENA=1 (the model states in one GPU arena registered on
#              the GPU's memory node): bitwise the same losses, and the log says the arena was made
#   stages     stages 0-3 on 2 ranks (sharing one GPU), losses bitwise equal to each other, through
#              the host-copy (MPI) collectives; emulated, also: no rank copies more through pageable
#              host memory than the 1-rank d2_losses run (each step's gradients, parameters and
#              communication buffer cross through pinned memory)
#   stages_nccl  the same with SZ_NCCL=1 and one GPU per rank (needs 2 GPUs; else skip); the JSON
#              says which path ran ("nccl" only if the run logged that NCCL was started)
#   offload    --offload-optimizer on 1 GPU against no offload: d2 fp32 losses within 1e-4 (the CPU's
#              AdamW against the GPU's: equal to rounding; "bitwise" says whether they are equal), the
#              offloaded run's CPU workers must have run tasks (the optimizer) and its CUDA worker too;
#              emulated, also: the offloaded run copies no more bytes through pageable host memory
#              than the other (the gradients going down and the parameters up each step are pinned;
#              the emulation's exit line counts such copies, which on a GPU block the CUDA worker)
#   pinned_fallback  emulated only: no page-locked memory (SZ_CUDA_EMU_HOST_ALLOC_FAIL=main, the
#              emulation's cudaHostAlloc failing on the main thread, where the model pins its
#              homes): 2 ranks at stage 2 on the host-copy collectives go on in pageable memory (one
#              warning a rank, losses bitwise those of the stages part's stage 2), and an offloaded
#              run, whose master and optimizer state must be pinned, stops before any step with
#              exit 1 and the reason (StarPU's own pinned malloc would abort the process)
#   budget     per-GPU --mem-budget: 1 MB is refused before any step, "per GPU", with settings that
#              fit; 2x the needed figure it names runs, its device peak under the budget
#   budget_shared  2 ranks sharing the GPU, no --mem-budget: each rank's budget is half the free memory
#              (sz-train's gpu_budget line says "shared by 2 ranks") and the run stays within it; a
#              --mem-budget of 0.75 x the free memory is refused before any step (2 ranks x it > free)
#   bench      sz-bench --model d12 --batch 8 --seq 1024 --precision bf16 on one GPU, with its mfu,
#              gpu_peak_tflops and bf16_path (absent from the row if sz-bench has none: then a fail;
#              a bf16_path other than native, the GPU rule's pick on sm_80+, fails too)
#   mfu_target the speed target (issue 15, part 7): sz-bench --model d12 --batch 16 --seq 1024
#              --precision bf16 on one GPU, "pass" when its mfu >= 0.45; beside it the same run with
#              STARPU_CUDA_PIPELINE=0 (pipeline0_mfu, pipeline0_step_ms: each asynchronous codelet
#              followed by a stream synchronize, what StarPU's blocking drivers did before
#              deps/starpu-1.3.10-cuda-pipeline.patch). A measured target: it does not count toward
#              "total" unless a run failed. Emulated: the tiny model, both runs must succeed ("skip")
#              and the pipelined one must have polled more events not yet done (the emulation's
#              "queries answered not ready") than the other: it queued tasks ahead
#   shapes     emulated only: the bench's own shape (d12 B8 T1024 bf16, and fp32), one step on the
#              emulation with SZ_CUDA_EMU_BLOCKS=ends (each launch's first and last block, each
#              GEMM's first and last column; the results mean nothing) and its device memory left
#              unprotected (SZ_CUDA_EMU_PROTECT=0: at gigabytes the mprotect calls take minutes):
#              every launch configuration, copy and GEMM range and the ends of every index space at
#              the GPU's sizes; "pass" when both runs finished with no emulation error and sent at
#              most 16 MiB from the GPU to RAM (StarPU's STARPU_BUS_STATS; every state lives on the
#              GPU, and a step sends back its losses: 7.2 GB went back before StarPU's write-back of
#              dirty buffers was turned off, sched/runtime.c)
#   sched_zero, sched_dmdas, sched_prio, sched_lws   the scheduler rows: 2 ranks sharing the GPU (the
#              host-copy collectives), ZeRO stage 3, d12 B4 per rank T1024 bf16, STARPU_SCHED each:
#              step_ms, device_peak_bytes (the engine's count), device_measured_peak_bytes (StarPU's
#              allocations on the GPU at their most), gpu_used_bytes, overlap (the zero policy
#              measures it; -1 for StarPU's own policies), comm_task_s, compute_task_s, mfu; "pass"
#              when the run succeeded on the GPU. Printed after all four ran, each with "zero_wins"
#              (scripts/sched_rank.sh: whether zero beats that policy on the step time and the device
#              peak; on zero's row, whether it beats all, and overlap >= 0.8 where communication is
#              shorter than compute), then
#   sched_ranking  the summary: fastest policy, lowest device peak, "pass" when zero wins every
#              criterion that applies. A measured target: it does not count toward "total"
#   sched_ranking_canned  dry run only: the same ranking on made-up rows
#              (scripts/gpu-check-canned-rows.jsonl, or $SZ_GPU_CHECK_CANNED_ROWS), printed as
#              canned_sched_* rows and this summary, so the ranking is tested without a GPU
#              (tests/gpu_check_cli.sh)
# SZ_GPU_CHECK_PARTS=a,b,... runs only those parts (the build and data steps always run);
# SZ_GPU_CHECK_CMAKE_ARGS: more cmake arguments for the emulated build (scripts/test.sh: no tests).
#
# Without a GPU: `scripts/gpu-check.sh --emulated` (or SZ_GPU_CHECK_EMULATED=1) builds the CUDA path
# for the host emulation of one GPU (-DSZ_CUDA_EMULATION=ON, build dir default ./build-emu:
# tests/cuda_emu; StarPU's CUDA worker drives it through the emulation's libcudart) and runs the
# same parts on it with the dry run's tiny models for bench and the scheduler rows: the kernels, the
# placement, the transfers, the budget, the offload and this script itself, everything but the
# hardware's numbers (attention_bench is skipped: its timings mean nothing there; the scheduler rows
# are not ranked). stages_nccl runs there too: each rank's process emulates a GPU of its own and the
# emulation's NCCL moves the bytes over MPI. Figures from it (ms, mfu) are the emulation's, not a GPU's.
#
# On a bare GPU machine (a CUDA image without Open MPI, StarPU & co. and without a network: the
# lent device machine): `scripts/gpu-check.sh --bundle FILE` (or SZ_GPU_BUNDLE=FILE), FILE made on
# a development machine by scripts/gpu-bundle.sh. The bundle is unpacked into a temporary folder
# (removed at the end; $SZ_GPU_BUNDLE_DIR instead if set, kept), its programs, libraries and Open
# MPI put on PATH / LD_LIBRARY_PATH / OPAL_* for the check's own processes, with the CUDA libraries
# the machine has (scripts/gpu-bundle-env.sh), and the parts run its programs. SZ_BUILD_DIR is
# then not used; the logs go to $SZ_GPU_LOG (default ./build-gpu/gpu-check-logs).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
bundle="${SZ_GPU_BUNDLE:-}"
emulated="${SZ_GPU_CHECK_EMULATED:-0}"
usage_err=""
while [ $# -gt 0 ]; do
    case $1 in
        --bundle) if [ $# -ge 2 ] && [ -n "$2" ]; then bundle=$2; shift 2; else usage_err="--bundle needs a FILE"; break; fi ;;
        --bundle=*) bundle=${1#--bundle=}; shift ;;
        --emulated) emulated=1; shift ;;
        -h|--help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) usage_err="unknown argument $1"; break ;;
    esac
done
[ -z "$usage_err" ] && [ -n "$bundle" ] && [ "$emulated" = 1 ] && usage_err="--bundle and --emulated exclude each other"
if [ -n "$usage_err" ]; then
    echo "gpu-check: $usage_err (usage: scripts/gpu-check.sh [--bundle FILE | --emulated]; --help)" >&2
    printf '{"part": "total", "result": "fail", "reason": "%s", "seconds": 0}\n' "${usage_err//\"/}"
    exit 2
fi
if [ -n "$bundle" ]; then
    build="" # its bin/ folder, once it is unpacked
    logs="${SZ_GPU_LOG:-$root/build-gpu/gpu-check-logs}"
elif [ "$emulated" = 1 ]; then
    build="${SZ_BUILD_DIR:-$root/build-emu}"
    logs="${SZ_GPU_LOG:-$build/gpu-check-logs}"
else
    build="${SZ_BUILD_DIR:-$root/build-gpu}"
    logs="${SZ_GPU_LOG:-$build/gpu-check-logs}"
fi
t_start=$(date +%s)
deadline=$((t_start + ${SZ_GPU_CHECK_BUDGET_S:-470}))
tl() { # a part's timeout: N seconds, or what is left of the check's budget (at least 5)
    local left=$((deadline - $(date +%s)))
    if [ "$left" -lt "$1" ]; then echo $((left > 5 ? left : 5)); else echo "$1"; fi
}
go() { # PART: 0 when it is selected (SZ_GPU_CHECK_PARTS) and there is time left to start it, else
    # 1 (with its "skip" line when time ran out; nothing for a part not selected)
    case ",${SZ_GPU_CHECK_PARTS:-$1}," in *",$1,"*) ;; *) return 1 ;; esac
    [ "$(date +%s)" -lt "$deadline" ] && return 0
    json "$1" skip "\"reason\": \"the check's time budget (${SZ_GPU_CHECK_BUDGET_S:-470} s) is spent\""
    return 1
}
json() { printf '{"part": "%s", "result": "%s"%s}\n' "$1" "$2" "${3:+, $3}"; }
any_fail=0
fail_part() { any_fail=1; json "$1" fail "$2"; }

# SZ_GPU_CHECK_OUT=DIR (say the device machine's $OUT): the logs packed into DIR/gpu-check-logs.tgz
# at the end, whatever happened (one file: what comes back from a lent machine is a few files).
pack_logs() {
    [ -n "${SZ_GPU_CHECK_OUT:-}" ] && [ -d "$logs" ] &&
        tar czf "$SZ_GPU_CHECK_OUT/gpu-check-logs.tgz" -C "$logs" . 2>/dev/null || true
}
unpacked="" # the bundle's temporary folder (removed at the end)
at_exit() {
    pack_logs
    [ -n "$unpacked" ] && [ -z "${SZ_GPU_BUNDLE_DIR:-}" ] && rm -rf "$unpacked"
    return 0
}
trap at_exit EXIT
finish() { # RC: the summary line, then exit RC (every way out of the check prints it)
    json total "$([ "$1" = 0 ] && echo pass || { [ "$1" = 77 ] && echo skip || echo fail; })" "\"seconds\": $(($(date +%s) - t_start))"
    exit "$1"
}

# ---- --bundle: unpack it and check what it needs of this machine (before the GPU is looked for:
# a bundle that cannot run here says so on any machine) ----
mval() { sed -n "s/^$1=//p" "$unpacked/sz-gpu/MANIFEST" 2>/dev/null | head -1; } # KEY: from the bundle's MANIFEST
if [ -n "$bundle" ]; then
    mkdir -p "$logs"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    export OMPI_MCA_btl_vader_single_copy_mechanism="${OMPI_MCA_btl_vader_single_copy_mechanism:-none}"
    bprob=""
    if [ ! -f "$bundle" ]; then
        bprob="no bundle file $bundle (scripts/gpu-bundle.sh makes it)"
    else
        if [ -n "${SZ_GPU_BUNDLE_DIR:-}" ]; then unpacked="$SZ_GPU_BUNDLE_DIR" && mkdir -p "$unpacked"
        else unpacked=$(mktemp -d "${TMPDIR:-/tmp}/sz-gpu-check.XXXXXX"); fi
        if command -v xz >/dev/null 2>&1; then
            tar -C "$unpacked" -xJf "$bundle" >"$logs/unpack.log" 2>&1
        else # no xz: Python's tarfile reads it
            python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$bundle" "$unpacked" >"$logs/unpack.log" 2>&1
        fi || bprob="cannot unpack $bundle (tar -xJ; python3's tarfile where there is no xz): $(tail -1 "$logs/unpack.log" | tr -d '"\\')"
        build="$unpacked/sz-gpu/bin"
        [ -z "$bprob" ] && [ ! -f "$unpacked/sz-gpu/MANIFEST" ] && bprob="$bundle has no sz-gpu/MANIFEST: not a bundle of scripts/gpu-bundle.sh"
    fi
    if [ -n "$bprob" ]; then
        echo "gpu-check: $bprob" >&2
        fail_part prereq "\"bundle\": \"$bundle\", \"missing\": \"$bprob\""
        finish 1
    fi
    . "$here/gpu-bundle-env.sh"
    sz_bundle_env "$unpacked/sz-gpu"
    missing=""
    glibc_have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
    glibc_need=$(mval glibc_needed)
    if [ -z "$glibc_have" ]; then
        missing="$missing glibc(this machine's version unknown: getconf GNU_LIBC_VERSION failed; the bundle needs $glibc_need)"
    elif [ -n "$glibc_need" ] && [ "$(printf '%s\n%s\n' "$glibc_need" "$glibc_have" | sort -V | head -1)" != "$glibc_need" ]; then
        missing="$missing glibc(this machine has $glibc_have, the bundle needs $glibc_need: make the bundle on an older system)"
    fi
    cpu_have=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | sed 's/^flags[[:space:]]*:[[:space:]]*//') "
    lack=""
    for f in $(mval cpu_flags); do case "$cpu_have" in *" $f "*) ;; *) lack="$lack $f" ;; esac; done
    [ -z "$lack" ] || missing="$missing cpu(the bundle's -march=$(mval march) needs$lack: SZ_BUNDLE_MARCH=x86-64-v2 scripts/gpu-bundle.sh)"
    for p in $(mval programs); do [ -x "$build/$p" ] || missing="$missing $p(not in the bundle)"; done
    [ -x "$unpacked/sz-gpu/mpi/bin/mpiexec" ] || missing="$missing mpiexec(not in the bundle)"
    nf=$(for f in "$build"/* "$build"/tests/* "$unpacked"/sz-gpu/mpi/bin/* "$unpacked"/sz-gpu/mpi/lib/openmpi3/*.so; do
        [ -f "$f" ] || continue
        ldd "$f" 2>/dev/null | awk -v f="${f##*/}" '/not found/ {print f ":" $1}'
    done | sort -u | tr '\n' ' ')
    [ -z "$nf" ] || missing="$missing libraries-not-found(${nf% })"
    mpiv=$(timeout -k 5 20 mpiexec --version 2>&1 | head -1 | tr -d '"\\')
    if [ -z "$missing" ] && ! timeout -k 5 60 mpiexec -n 1 true >"$logs/mpiexec.log" 2>&1; then
        missing="$missing mpiexec(the bundle's mpiexec -n 1 true failed: $(grep -v '^[-[:space:]]*$' "$logs/mpiexec.log" | head -2 | tr '\n"\\' '   '))"
    fi
    if [ -n "$missing" ]; then
        echo "gpu-check: the bundle cannot run on this machine:$missing" >&2
        fail_part prereq "\"bundle\": \"$bundle\", \"missing\": \"${missing# }\", \"glibc\": \"${glibc_have:-unknown}\", \"glibc_needed\": \"$glibc_need\", \"cuda_dirs\": \"$SZ_BUNDLE_CUDA_DIRS\""
        finish 1
    fi
    json prereq pass "\"bundle\": \"$bundle\", \"glibc\": \"$glibc_have\", \"glibc_needed\": \"$glibc_need\", \"cuda_dirs\": \"$SZ_BUNDLE_CUDA_DIRS\", \"mpiexec\": \"$mpiv\""
fi

# ---- a GPU at all? (nvidia-smi when present; the kernel test's own check after the build) ----
if command -v nvidia-smi >/dev/null 2>&1; then
    ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
elif ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
    ngpu=unknown
else
    ngpu=0
fi
# SZ_GPU_CHECK_DRYRUN=1: run the parts anyway on the existing build (to test this script on a
# machine without a GPU: the parts then fail, since no task runs on a CUDA worker).
[ "${SZ_GPU_CHECK_DRYRUN:-0}" = 1 ] && ngpu=dryrun
[ "$emulated" = 1 ] && ngpu=emulated # one emulated GPU per process, whatever the machine has
if [ "$ngpu" = 0 ]; then
    echo "gpu-check: no GPU on this machine (no nvidia-smi GPU, no /dev/nvidiaN): nothing to check" >&2
    json gpu skip '"reason": "no GPU"'
    json total skip '"seconds": 0'
    exit 77
fi

# ---- what the build needs, named before it starts (a bare machine lacks some: say which). In a
# dry run a "fail" here is reported but ends nothing (the dry run uses the existing build) ----
if [ -z "$bundle" ]; then
missing="" cfgh=""
for c in cmake pkg-config mpiexec; do command -v $c >/dev/null 2>&1 || missing="$missing $c"; done
command -v "${CUDACXX:-nvcc}" >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || missing="$missing nvcc"
envf="${SZ_DEPS_DIR:-/opt/starzero}/starpu.env"
if [ ! -f "$envf" ]; then
    missing="$missing starpu(no $envf: scripts/setup.sh makes it, with apt and the network)"
else
    starpu_home=$(. "$envf" && echo "${SZ_STARPU_HOME:-}")
    cfgh=$(ls "${starpu_home:-/usr}"/include/starpu/1.*/starpu_config.h 2>/dev/null | head -1)
    if [ -z "$cfgh" ]; then
        missing="$missing starpu_config.h(none under ${starpu_home:-/usr}/include/starpu)"
    elif ! grep -q '^#define STARPU_USE_CUDA 1' "$cfgh"; then
        missing="$missing starpu-with-cuda($cfgh: StarPU built without CUDA; rerun scripts/setup.sh where nvcc is found)"
    fi
fi
for pc in hwloc libcjson; do pkg-config --exists $pc 2>/dev/null || missing="$missing $pc(pkg-config)"; done
if [ -n "$missing" ]; then
    echo "gpu-check: this machine lacks what the build needs:$missing" >&2
    if [ "$ngpu" = dryrun ]; then
        json prereq fail "\"missing\": \"${missing# }\", \"note\": \"dry run: not counted\""
    else
        fail_part prereq "\"missing\": \"${missing# }\""
        finish 1
    fi
else
    json prereq pass "\"starpu_config\": \"$cfgh\""
fi
fi # (no bundle)

# ---- build with CUDA ----
mkdir -p "$build" "$logs"
if [ -n "$bundle" ]; then
    bc=$(mval commit) tc=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
    json build pass "\"from\": \"bundle\", \"commit\": \"$bc\", \"tree_commit\": \"$tc\", \"built\": \"$(mval built)\", \"cuda_archs\": \"$(mval cuda_archs)\", \"march\": \"$(mval march)\""
    [ "${bc%-dirty}" = "$tc" ] || [ "$tc" = unknown ] ||
        echo "gpu-check: the bundle was built from $bc, this tree is at $tc: the parts run the bundle's programs with this tree's scripts" >&2
elif [ "$ngpu" = dryrun ]; then
    json build skip '"reason": "dry run: the existing build"'
elif [ "$emulated" = 1 ]; then
    # (its own timeout: the emulated build compiles the whole tree with no GPU to wait for)
    if SZ_BUILD_DIR="$build" timeout -k 10 "${SZ_GPU_CHECK_BUILD_S:-900}" "$root/scripts/build.sh" -DSZ_USE_CUDA=ON \
        -DSZ_CUDA_EMULATION=ON -DSZ_WERROR=ON ${SZ_GPU_CHECK_CMAKE_ARGS:-} >"$logs/build.log" 2>&1; then
        json build pass "\"emulated\": true, \"seconds\": $(($(date +%s) - t_start))"
        t_start=$(date +%s) deadline=$((t_start + ${SZ_GPU_CHECK_BUDGET_S:-470})) # the parts' budget from here
    else
        tail -25 "$logs/build.log" >&2
        fail_part build "\"emulated\": true, \"log\": \"$logs/build.log\""
        finish 1
    fi
elif ! SZ_BUILD_DIR="$build" timeout -k 10 "${SZ_GPU_CHECK_BUILD_S:-300}" "$root/scripts/build.sh" -DSZ_USE_CUDA=ON \
    -DSZ_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES="${SZ_CUDA_ARCH:-native}" >"$logs/build.log" 2>&1; then
    tail -25 "$logs/build.log" >&2 # (the reason, in the output itself)
    fail_part build "\"log\": \"$logs/build.log\""
    finish 1
else
    json build pass "\"seconds\": $(($(date +%s) - t_start))"
fi
. "$root/scripts/common.sh"
[ -n "$bundle" ] || sz_load_env
export STARPU_SILENT=1 STARPU_FXT_TRACE=0 STARPU_HOME="$build/starpu-home"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Open MPI's shared-memory single copy (CMA: process_vm_readv) is missing in sandboxed kernels
# (gVisor, some containers) and then fails every large intra-node message: plain copies instead
export OMPI_MCA_btl_vader_single_copy_mechanism="${OMPI_MCA_btl_vader_single_copy_mechanism:-none}"
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
if [ "$emulated" = 1 ]; then
    # the emulation's libraries first, whatever LD_LIBRARY_PATH holds (StarPU links libcudart too)
    export LD_LIBRARY_PATH="$build/cuda-emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    gpu_name="cuda-emu (host emulation)"
fi
# Two ranks on one GPU (the stages and scheduler parts) need the Default compute mode: in
# Exclusive_Process mode the second process cannot create its context there
cmode=$(nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null | head -1)
share_skip() { # PART: 0 (after its skip line) when two ranks cannot share the GPU
    case "$cmode" in
        Exclusive_Process|Prohibited)
            json "$1" skip "\"reason\": \"the GPU's compute mode is $cmode: two ranks cannot share it (nvidia-smi -c DEFAULT)\""
            return 0 ;;
    esac
    return 1
}

# ---- kernels ----
if go kernels; then
    timeout -k 10 $(tl 150) "$build/tests/test_cuda_kernels" >"$logs/kernels.log" 2>&1
    rc=$?
    case $rc in
        0) json kernels pass "\"gpu\": \"$gpu_name\", \"log\": \"$logs/kernels.log\"" ;;
        77) echo "gpu-check: the CUDA runtime sees no device (driver older than the toolkit? see $logs/kernels.log)" >&2
            json kernels skip '"reason": "cudaGetDeviceCount found no device"'
            [ "$ngpu" = dryrun ] || finish 77 ;;
        *) fail_part kernels "\"rc\": $rc, \"log\": \"$logs/kernels.log\"" ;;
    esac
fi

# ---- attention kernel timing (figures) ----
if [ "$emulated" = 1 ] && go attention_bench; then
    json attention_bench skip '"reason": "emulated: kernel timings mean nothing there"'
elif go attention_bench; then
    timeout -k 10 $(tl 60) "$build/tests/test_cuda_kernels" --bench-attention >"$logs/attention_bench.json" 2>&1
    rc=$?
    line=$(grep '"tiled_fwd_ms"' "$logs/attention_bench.json" | tail -1)
    if [ $rc -eq 0 ] && [ -n "$line" ]; then
        line=${line#\{}
        json attention_bench pass "${line%\}}"
    else
        fail_part attention_bench "\"rc\": $rc, \"log\": \"$logs/attention_bench.json\""
    fi
fi

# ---- data for the training parts ----
data="$build/gpu-check-data"
mkdir -p "$data"
texts=$(ls /usr/share/common-licenses/{GPL-3,LGPL-3,Apache-2.0} 2>/dev/null)
[ -n "$bundle" ] && texts=$(ls "$unpacked"/sz-gpu/data/{GPL-3,LGPL-3,Apache-2.0} 2>/dev/null)
if [ -z "$texts" ]; then
    texts="$root/README.md"
fi
needs_data=0 # (only the training parts read it)
for p in d2_losses d2_bf16_native d2_fp16 llama_d2_losses llama_d2_bf16_native gpu_arena zero_fold stages stages_nccl offload budget; do
    case ",${SZ_GPU_CHECK_PARTS:-$p}," in *",$p,"*) needs_data=1 ;; esac
done
[ $needs_data = 0 ] || "$build/sz-prepare" --out-dir "$data" --prefix chk $texts >"$logs/prepare.log" 2>&1 ||
    fail_part data "\"log\": \"$logs/prepare.log\""
train=(--config d2 --vocab 256 --max-seq 64 --train "$data/chk_train.bin" --batch 4 --seq 64 --steps 5 --lr 1e-3 --json)
bench_model=(--model d12 --batch 8 --seq 1024) sched_model=(--model d12 --batch 4 --seq 1024)
if [ "$ngpu" = dryrun ] || [ "$ngpu" = emulated ]; then # the plumbing only: tiny models (a CPU cannot run d12 T1024 in time)
    bench_model=(--model d2 --vocab 256 --batch 2 --seq 64) sched_model=(--model d2 --vocab 256 --batch 2 --seq 64)
fi
losses() { grep '"loss"' "$1" | sed 's/.*"loss": \([-0-9.e]*\).*/\1/'; }
cuda_tasks() { # tasks executed by CUDA workers, from StarPU's worker statistics
    awk '/^CUDA [0-9]/ {c = 1; next} c && /task\(s\)/ {for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/) {n += $i; break}; c = 0} END {print n + 0}' "$1"
}
cpu_tasks() { # tasks executed by CPU workers ("CPU 0", ...), from the same statistics, less the one
    # start-up task each CPU worker runs (sched/runtime.c's starpu_execute_on_each_worker; StarPU
    # counts it among the worker's tasks, and the emulated check showed it: 1 CPU task per run)
    awk '/^CPU [0-9]/ {c = 1; w++; next} c && /task\(s\)/ {for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/) {n += $i; break}; c = 0}
        END {print (n > w ? n - w : 0)}' "$1"
}
ranks_stats() { # ERR: the ranks' worker statistics (SZ_RANK_STATS=ERR.stats, scripts/gpu-rank.sh)
    # appended to ERR one rank after the other; on one stderr their lines interleave and the counts
    # above misread them
    local f
    for f in "$1".stats.*; do [ -f "$f" ] && cat "$f" >>"$1" && rm -f "$f"; done
    return 0
}
jnum() { # KEY FILE: a number from the last JSON line of FILE ("null" when absent; a string without
    # its quotes; numbers as Python's float form, "410.500" -> 410.5): scripts/json.awk, no Python
    tail -1 "$2" | sz_jawk '{ v = jraw($0, K) } END { if (v == "" || v == "null") print "null"
        else if (substr(v, 1, 1) == "\"") print substr(v, 2, length(v) - 2); else print jnumfmt(v) }' K="$1" 2>/dev/null || echo null
}

# ---- d2 on 1 GPU against the CPU losses ----
if go d2_losses; then
    STARPU_NCUDA=0 timeout -k 10 $(tl 60) "$build/sz-train" "${train[@]}" >"$logs/d2_cpu.json" 2>"$logs/d2_cpu.err"
    rc_cpu=$?
    STARPU_NCUDA=1 STARPU_WORKER_STATS=1 timeout -k 10 $(tl 60) "$build/sz-train" "${train[@]}" >"$logs/d2_gpu.json" 2>"$logs/d2_gpu.err"
    rc_gpu=$?
    ntask=$(cuda_tasks "$logs/d2_gpu.err")
    if [ $rc_cpu -ne 0 ] || [ $rc_gpu -ne 0 ]; then
        fail_part d2_losses "\"rc_cpu\": $rc_cpu, \"rc_gpu\": $rc_gpu, \"log\": \"$logs/d2_gpu.err\""
    else
        worst=$(paste <(losses "$logs/d2_cpu.json") <(losses "$logs/d2_gpu.json") |
            awk '{d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > w) w = r} END {printf "%.3g", w + 0}')
        n=$(losses "$logs/d2_gpu.json" | wc -l)
        ok=$(awk -v w="$worst" -v n="$n" -v t="$ntask" 'BEGIN {print (w <= 1e-4 && n >= 5 && t > 0) ? 1 : 0}')
        fig="\"max_rel_loss_diff\": $worst, \"steps\": $n, \"cuda_tasks\": $ntask"
        [ "$ok" = 1 ] && json d2_losses pass "$fig" || fail_part d2_losses "$fig, \"note\": \"needs rel diff <= 1e-4 and cuda_tasks > 0\""
    fi
fi

# ---- d2 bf16 on 1 GPU, native by the GPU rule, against the CPU's native path ----
if go d2_bf16_native; then
    STARPU_NCUDA=0 timeout -k 10 $(tl 60) "$build/sz-train" "${train[@]}" --precision bf16 --bf16-compute native \
        >"$logs/d2n_cpu.json" 2>"$logs/d2n_cpu.err"
    rc_cpu=$?
    STARPU_NCUDA=1 STARPU_WORKER_STATS=1 timeout -k 10 $(tl 60) "$build/sz-train" "${train[@]}" --precision bf16 \
        --bf16-compute auto >"$logs/d2n_gpu.json" 2>"$logs/d2n_gpu.err"
    rc_gpu=$?
    ntask=$(cuda_tasks "$logs/d2n_gpu.err")
    path=$(grep -o '"bf16_path": "[a-z0-9]*"' "$logs/d2n_gpu.json" | head -1 | sed 's/.*: "\(.*\)"/\1/')
    if [ $rc_cpu -ne 0 ] || [ $rc_gpu -ne 0 ]; then
        fail_part d2_bf16_native "\"rc_cpu\": $rc_cpu, \"rc_gpu\": $rc_gpu, \"bf16_path\": \"${path:-none}\", \"log\": \"$logs/d2n_gpu.err\""
    else
        worst=$(paste <(losses "$logs/d2n_cpu.json") <(losses "$logs/d2n_gpu.json") |
            awk '{d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > w) w = r} END {printf "%.3g", w + 0}')
        n=$(losses "$logs/d2n_gpu.json" | wc -l)
        ok=$(awk -v w="$worst" -v n="$n" -v t="$ntask" -v p="$path" 'BEGIN {print (w <= 2e-2 && n >= 5 && t > 0 && p == "native") ? 1 : 0}')
        fig="\"bf16_path\": \"${path:-none}\", \"max_rel_loss_diff\": $worst, \"tolerance\": 2e-2, \"steps\": $n, \"cuda_tasks\": $ntask"
        fig="$fig, \"cpu_tasks\": $(cpu_tasks "$logs/d2n_gpu.err")" # a figure: 0 when every op ran on the GPU
        [ "$ok" = 1 ] && json d2_bf16_native pass "$fig" ||
            fail_part d2_bf16_native "$fig, \"note\": \"needs bf16_path native, rel diff <= 2e-2 and cuda_tasks > 0\", \"log\": \"$logs/d2n_gpu.err\""
    fi
fi

# ---- d2 fp16 (dynamic loss scaling, a forced overflow) on 1 GPU against the CPU-only fp16 run ----
scaler_steps() { sed -n 's/.*"loss_scale": \([0-9.e+]*\), "skipped": \([a-z]*\).*/\1 \2/p' "$1"; }
if go d2_fp16; then
    f16=(--precision fp16 --initial-scale-power 24 --loss-scale-window 2 --steps 16)
    STARPU_NCUDA=0 timeout -k 10 $(tl 60) "$build/sz-train" "${train[@]}" "${f16[@]}" \
        >"$logs/d2h_cpu.json" 2>"$logs/d2h_cpu.err"
    rc_cpu=$?
    STARPU_NCUDA=1 STARPU_WORKER_STATS=1 timeout -k 10 $(tl 90) "$build/sz-train" "${train[@]}" "${f16[@]}" \
        >"$logs/d2h_gpu.json" 2>"$logs/d2h_gpu.err"
    rc_gpu=$?
    ntask=$(cuda_tasks "$logs/d2h_gpu.err")
    if [ $rc_cpu -ne 0 ] || [ $rc_gpu -ne 0 ]; then
        fail_part d2_fp16 "\"rc_cpu\": $rc_cpu, \"rc_gpu\": $rc_gpu, \"log\": \"$logs/d2h_gpu.err\""
    else
        worst=$(paste <(losses "$logs/d2h_cpu.json") <(losses "$logs/d2h_gpu.json") |
            awk '{d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > w) w = r} END {printf "%.3g", w + 0}')
        n=$(losses "$logs/d2h_gpu.json" | wc -l)
        same=0
        cmp -s <(scaler_steps "$logs/d2h_cpu.json") <(scaler_steps "$logs/d2h_gpu.json") && same=1
        nskip=$(scaler_steps "$logs/d2h_gpu.json" | grep -c ' true$')
        napp=$(scaler_steps "$logs/d2h_gpu.json" | grep -c ' false$')
        ok=$(awk -v w="$worst" -v n="$n" -v t="$ntask" -v s="$same" -v k="$nskip" -v a="$napp" \
            'BEGIN {print (w <= 1e-3 && n == 16 && t > 0 && s == 1 && k >= 2 && a >= 4) ? 1 : 0}')
        fig="\"max_rel_loss_diff\": $worst, \"tolerance\": 1e-3, \"steps\": $n, \"skipped\": $nskip, \"applied\": $napp"
        fig="$fig, \"same_scales_and_skips\": $([ $same = 1 ] && echo true || echo false)"
        fig="$fig, \"final_loss_scale\": $(scaler_steps "$logs/d2h_gpu.json" | tail -1 | cut -d' ' -f1)"
        fig="$fig, \"cuda_tasks\": $ntask, \"cpu_tasks\": $(cpu_tasks "$logs/d2h_gpu.err")"
        [ "$ok" = 1 ] && json d2_fp16 pass "$fig" ||
            fail_part d2_fp16 "$fig, \"note\": \"needs every step's loss scale and skip equal to the CPU's, >= 2 skipped and >= 4 applied, rel diff <= 1e-3 and cuda_tasks > 0\", \"log\": \"$logs/d2h_gpu.err\""
    fi
fi

# ---- the LLaMA-style model (--arch llama, d2: RMSNorm, RoPE, SwiGLU) on 1 GPU against its CPU
# losses: fp32 within 1e-4; bf16 with --bf16-compute auto (native by the GPU rule) against the CPU's
# native path within 2e-2, as the GPT-2 parts ----
llama_part() { # PART TOL NEED_PATH (native, or any) CPU_ARGS... -- GPU_ARGS...
    local part=$1 tol=$2 need=$3 cpu=() gpu=() rc_cpu rc_gpu ntask path worst n ok fig
    shift 3
    while [ $# -gt 0 ] && [ "$1" != -- ]; do cpu+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    gpu=("$@")
    STARPU_NCUDA=0 timeout -k 10 $(tl 60) "$build/sz-train" "${train[@]}" --arch llama "${cpu[@]}" \
        >"$logs/${part}_cpu.json" 2>"$logs/${part}_cpu.err"
    rc_cpu=$?
    STARPU_NCUDA=1 STARPU_WORKER_STATS=1 timeout -k 10 $(tl 60) "$build/sz-train" "${train[@]}" --arch llama "${gpu[@]}" \
        >"$logs/${part}_gpu.json" 2>"$logs/${part}_gpu.err"
    rc_gpu=$?
    ntask=$(cuda_tasks "$logs/${part}_gpu.err")
    path=$(grep -o '"bf16_path": "[a-z0-9]*"' "$logs/${part}_gpu.json" | head -1 | sed 's/.*: "\(.*\)"/\1/')
    if [ $rc_cpu -ne 0 ] || [ $rc_gpu -ne 0 ]; then
        fail_part "$part" "\"rc_cpu\": $rc_cpu, \"rc_gpu\": $rc_gpu, \"log\": \"$logs/${part}_gpu.err\""
        return
    fi
    worst=$(paste <(losses "$logs/${part}_cpu.json") <(losses "$logs/${part}_gpu.json") |
        awk '{d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > w) w = r} END {printf "%.3g", w + 0}')
    n=$(losses "$logs/${part}_gpu.json" | wc -l)
    # the bf16 part must have run the native path (need native: the GPU rule's pick once every op has its twin)
    ok=$(awk -v w="$worst" -v n="$n" -v t="$ntask" -v tol="$tol" -v p="${path:-none}" -v need="$need" \
        'BEGIN {print (w <= tol + 0 && n >= 5 && t > 0 && (need == "any" || p == need)) ? 1 : 0}')
    fig="\"arch\": \"llama\", \"bf16_path\": \"${path:-none}\", \"max_rel_loss_diff\": $worst, \"tolerance\": $tol"
    fig="$fig, \"steps\": $n, \"cuda_tasks\": $ntask, \"cpu_tasks\": $(cpu_tasks "$logs/${part}_gpu.err")"
    [ "$ok" = 1 ] && json "$part" pass "$fig" ||
        fail_part "$part" "$fig, \"note\": \"needs rel diff <= $tol, cuda_tasks > 0 (and bf16_path native for bf16)\", \"log\": \"$logs/${part}_gpu.err\""
}
go llama_d2_losses && llama_part llama_d2_losses 1e-4 any --
go llama_d2_bf16_native && llama_part llama_d2_bf16_native 2e-2 native --precision bf16 --bf16-compute native -- \
    --precision bf16 --bf16-compute auto

# ---- placement: on that 1-rank GPU run (no communication worker) every task has a CUDA
# implementation, so under the zero policy the CPU worker must have run none ----
if go placement; then
    nc=$(cpu_tasks "$logs/d2_gpu.err") ng=$(cuda_tasks "$logs/d2_gpu.err")
    fig="\"cpu_tasks\": $nc, \"cuda_tasks\": $ng, \"policy\": \"zero\""
    if [ "$ng" -gt 0 ] && [ "$nc" -eq 0 ]; then json placement pass "$fig"; else fail_part placement "$fig, \"log\": \"$logs/d2_gpu.err\""; fi
fi

# ---- M_D on the GPU (SZ_GPU_ARENA=1, opt-in): the d2 GPU run again, bitwise the same losses ----
if go gpu_arena; then
    SZ_GPU_ARENA=1 SZ_LOG=info STARPU_NCUDA=1 STARPU_WORKER_STATS=1 timeout -k 10 $(tl 60) "$build/sz-train" "${train[@]}" \
        >"$logs/d2_arena.json" 2>"$logs/d2_arena.err"
    rc=$?
    nt=$(cuda_tasks "$logs/d2_arena.err")
    used=$(grep -c "GPU arena:" "$logs/d2_arena.err")
    same=$([ -n "$(losses "$logs/d2_arena.json")" ] && [ "$(losses "$logs/d2_arena.json")" = "$(losses "$logs/d2_gpu.json")" ] && echo true || echo false)
    fig="\"rc\": $rc, \"cuda_tasks\": $nt, \"arena_logged\": $used, \"bitwise_equal_to_d2_gpu\": $same"
    if [ $rc -eq 0 ] && [ "$nt" -gt 0 ] && [ "$used" -gt 0 ] && [ "$same" = true ]; then json gpu_arena pass "$fig"
    else fail_part gpu_arena "$fig, \"log\": \"$logs/d2_arena.err\""; fi
fi

# ---- zero folding on the GPU: the d2 GPU run (folds on, the default: activation zeros and the
# parameters' gradients set by their CUDA first writers) against SZ_ZERO_FOLD=0 (every zeroing a
# task of its own). Values differ at most in the sign of a zero, so the losses should be bitwise
# equal; cuBLAS may pick another kernel for beta 0 than for beta 1, so the pass bound is 1e-6 ----
if go zero_fold; then
    SZ_ZERO_FOLD=0 STARPU_NCUDA=1 STARPU_WORKER_STATS=1 timeout -k 10 $(tl 60) "$build/sz-train" "${train[@]}" \
        >"$logs/d2_nofold.json" 2>"$logs/d2_nofold.err"
    rc=$?
    nt=$(cuda_tasks "$logs/d2_nofold.err")
    same=$([ -n "$(losses "$logs/d2_nofold.json")" ] && [ "$(losses "$logs/d2_nofold.json")" = "$(losses "$logs/d2_gpu.json")" ] && echo true || echo false)
    worst=$(paste <(losses "$logs/d2_gpu.json") <(losses "$logs/d2_nofold.json") |
        awk '{d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > w) w = r} END {printf "%.3g", w + 0}')
    n=$(losses "$logs/d2_nofold.json" | wc -l) n0=$(losses "$logs/d2_gpu.json" 2>/dev/null | wc -l)
    [ "$n0" = "$n" ] || worst=null # d2_losses did not run (or failed): nothing to compare with
    fig="\"rc\": $rc, \"cuda_tasks\": $nt, \"steps\": $n, \"bitwise_equal_to_folded\": $same, \"max_rel_loss_diff\": $worst"
    ok=$(awk -v w="$worst" -v n="$n" -v t="$nt" -v r="$rc" 'BEGIN {print (r == 0 && w != "null" && w <= 1e-6 && n >= 5 && t > 0) ? 1 : 0}')
    if [ "$ok" = 1 ]; then json zero_fold pass "$fig"
    else fail_part zero_fold "$fig, \"log\": \"$logs/d2_nofold.err\""; fi
fi

# ---- stages 0-3, 2 ranks, bitwise equal: host-copy collectives (the 2 ranks may share one GPU),
# then, with 2 GPUs or more, NCCL (SZ_NCCL=1, one GPU per rank through CUDA_VISIBLE_DEVICES) ----
# Emulated: the most MB a rank copied with a pageable host side (the emulation's exit lines in ERR;
# on a GPU such a copy blocks the CUDA worker). Each step's gradients and parameters cross through
# pinned memory with the host-copy collectives: a 2-rank run of any stage must then copy no more
# that way than the 1-rank d2 run did (d2_losses, twice the batch: its one-time placement and its
# tokens and losses), when that part ran.
pageable_mb() { sed -n 's/.* \([0-9.]*\) MB with pageable host memory$/\1/p' "$1" | sort -g | tail -1; }
pref=""
case ",${SZ_GPU_CHECK_PARTS:-d2_losses}," in
    *,d2_losses,*) [ "$emulated" = 1 ] && [ -f "$logs/d2_gpu.err" ] && pref=$(pageable_mb "$logs/d2_gpu.err") ;;
esac
stages() { # PART PATH [ENV...]
    local part=$1 path=$2 ref="" ok=1 fig="" stage rc nt cur
    shift 2
    for stage in 0 1 2 3; do
        env "$@" SZ_RANK_STATS="$logs/$part$stage.err.stats" STARPU_NCUDA=1 STARPU_WORKER_STATS=1 timeout -k 10 $(tl 60) \
            mpiexec -n 2 "$root/scripts/gpu-rank.sh" "$build/sz-train" "${train[@]}" --batch 2 --zero-stage $stage \
            >"$logs/$part$stage.json" 2>"$logs/$part$stage.err"
        rc=$?
        ranks_stats "$logs/$part$stage.err"
        nt=$(cuda_tasks "$logs/$part$stage.err")
        fig="$fig\"stage${stage}_rc\": $rc, \"stage${stage}_cuda_tasks\": $nt, "
        if [ $rc -ne 0 ] || [ "$nt" -le 0 ]; then ok=0; continue; fi   # no CUDA task: not a GPU run
        cur=$(losses "$logs/$part$stage.json" | tr '\n' ' ')
        [ -z "$ref" ] && ref="$cur"
        [ "$cur" = "$ref" ] || ok=0
        if [ "$emulated" = 1 ]; then # either rank's bytes copied through pageable host memory (below)
            cur=$(pageable_mb "$logs/$part$stage.err")
            fig="$fig\"stage${stage}_pageable_copy_mb\": ${cur:-null}, "
            [ -n "$cur" ] && { [ -z "$pref" ] || awk -v a="$cur" -v b="$pref" 'BEGIN {exit !(a <= b)}'; } || ok=0
        fi
    done
    grep -q "NCCL collectives on the CUDA workers" "$logs/${part}0.err" && path="nccl" || true
    fig="$fig\"ranks\": 2, \"gpus\": \"$ngpu\", \"path\": \"$path\"${pref:+, \"pageable_copy_mb_d2_1_rank\": $pref}"
    [ $ok = 1 ] && json "$part" pass "$fig" || fail_part "$part" "$fig"
}
go stages && ! share_skip stages && stages stages "host-copy (MPI)" SZ_GPU_SHARE=1 SZ_NCCL=0
if ! go stages_nccl; then
    :
elif [ "$ngpu" = emulated ]; then # each rank's process emulates a GPU of its own (another PCI bus)
    stages stages_nccl "expected nccl (the log says otherwise)" SZ_NCCL=1 SZ_LOG=info SZ_CUDA_EMU_PCI_BUS=rank
elif [ "$ngpu" != unknown ] && [ "$ngpu" != dryrun ] && [ "$ngpu" -ge 2 ]; then
    stages stages_nccl "expected nccl (the log says otherwise)" SZ_NCCL=1 SZ_LOG=info
else
    json stages_nccl skip '"reason": "NCCL needs a GPU per rank: fewer than 2 GPUs here"'
fi

# ---- ZeRO-Offload: --offload-optimizer against no offload, 1 GPU, d2 fp32 ----
if go offload; then
    STARPU_NCUDA=1 STARPU_WORKER_STATS=1 timeout -k 10 $(tl 60) "$build/sz-train" "${train[@]}" >"$logs/offload_off.json" 2>"$logs/offload_off.err"
    rc_off=$?
    STARPU_NCUDA=1 STARPU_WORKER_STATS=1 timeout -k 10 $(tl 60) "$build/sz-train" "${train[@]}" --offload-optimizer >"$logs/offload_on.json" 2>"$logs/offload_on.err"
    rc_on=$?
    if [ $rc_off -ne 0 ] || [ $rc_on -ne 0 ]; then
        fail_part offload "\"rc_no_offload\": $rc_off, \"rc_offload\": $rc_on, \"log\": \"$logs/offload_on.err\""
    else
        worst=$(paste <(losses "$logs/offload_off.json") <(losses "$logs/offload_on.json") |
            awk '{d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > w) w = r} END {printf "%.3g", w + 0}')
        n=$(losses "$logs/offload_on.json" | wc -l)
        bitwise=$([ "$(losses "$logs/offload_off.json")" = "$(losses "$logs/offload_on.json")" ] && echo true || echo false)
        nc=$(cpu_tasks "$logs/offload_on.err") ng=$(cuda_tasks "$logs/offload_on.err")
        fig="\"max_rel_loss_diff\": $worst, \"bitwise\": $bitwise, \"steps\": $n, \"cpu_tasks\": $nc, \"cuda_tasks\": $ng"
        fig="$fig, \"host_bytes_note\": \"master, m, v in pinned host memory\""
        ok=$(awk -v w="$worst" -v n="$n" -v c="$nc" -v g="$ng" 'BEGIN {print (w <= 1e-4 && n >= 5 && c > 0 && g > 0) ? 1 : 0}')
        if [ "$emulated" = 1 ]; then # the emulation counts the copies with a pageable host side (a GPU's
            # block the CUDA worker): the offload's own traffic (gradients down, parameters up) is pinned
            pon=$(pageable_mb "$logs/offload_on.err") poff=$(pageable_mb "$logs/offload_off.err")
            fig="$fig, \"pageable_copy_mb\": ${pon:-null}, \"pageable_copy_mb_no_offload\": ${poff:-null}"
            [ -n "$pon" ] && [ -n "$poff" ] && awk -v a="$pon" -v b="$poff" 'BEGIN {exit !(a <= b)}' || ok=0
        fi
        [ "$ok" = 1 ] && json offload pass "$fig" || fail_part offload "$fig, \"note\": \"needs rel diff <= 1e-4, CPU tasks (the optimizer) and CUDA tasks; emulated: no more bytes copied through pageable memory than without offload\""
    fi
fi

# ---- emulated: no page-locked memory left (the emulation's cudaHostAlloc fails on the main thread,
# where the model makes its pinned homes) ----
if [ "$emulated" = 1 ] && go pinned_fallback; then
    SZ_CUDA_EMU_HOST_ALLOC_FAIL=main SZ_GPU_SHARE=1 SZ_NCCL=0 STARPU_NCUDA=1 timeout -k 10 $(tl 60) \
        mpiexec -n 2 "$root/scripts/gpu-rank.sh" "$build/sz-train" "${train[@]}" --batch 2 --zero-stage 2 \
        >"$logs/pinned_fallback.json" 2>"$logs/pinned_fallback.err"
    rc_fb=$?
    warned=$(grep -c "could not be allocated .*go through pageable memory" "$logs/pinned_fallback.err")
    same=null
    [ -f "$logs/stages2.json" ] && case ",${SZ_GPU_CHECK_PARTS:-stages}," in *,stages,*)
        same=$([ "$(losses "$logs/pinned_fallback.json")" = "$(losses "$logs/stages2.json")" ] && echo true || echo false) ;; esac
    SZ_CUDA_EMU_HOST_ALLOC_FAIL=main STARPU_NCUDA=1 timeout -k 10 $(tl 60) "$build/sz-train" "${train[@]}" \
        --offload-optimizer >"$logs/pinned_required.json" 2>"$logs/pinned_required.err"
    rc_req=$?
    said=$(grep -c "must live there (--offload-optimizer)" "$logs/pinned_required.err")
    fig="\"rc_fallback\": $rc_fb, \"ranks_warned\": $warned, \"bitwise_equal_to_stage2\": $same"
    fig="$fig, \"rc_offload\": $rc_req, \"offload_refused_with_reason\": $([ "$said" -gt 0 ] && echo true || echo false)"
    if [ $rc_fb -eq 0 ] && [ "$warned" -eq 2 ] && [ "$same" != false ] && [ $rc_req -eq 1 ] && [ "$said" -gt 0 ] &&
        ! grep -q '"loss"' "$logs/pinned_required.json"; then
        json pinned_fallback pass "$fig"
    else
        fail_part pinned_fallback "$fig, \"note\": \"without page-locked memory: the host-copy run goes on in pageable memory (one warning a rank, the same losses), the offloaded one stops before any step (exit 1) saying why\", \"log\": \"$logs/pinned_*.err\""
    fi
fi

# ---- per-GPU budget: refused with what fits, then a fitting one respected ----
if go budget; then
    STARPU_NCUDA=1 timeout -k 10 $(tl 60) "$build/sz-train" "${train[@]}" --mem-budget 1M >"$logs/budget_small.txt" 2>&1
    rc_small=$?
    need=$(grep -o 'the plan needs [0-9.]* MB per GPU' "$logs/budget_small.txt" | head -1 | awk '{print $4}')
    if [ $rc_small -eq 0 ] || [ -z "$need" ] || ! grep -q "Settings that fit" "$logs/budget_small.txt" ||
        grep -q '^step' "$logs/budget_small.txt"; then
        fail_part budget "\"rc_small\": $rc_small, \"needs_mb\": \"${need:-none}\", \"note\": \"1 MB must be refused before any step, per GPU, with settings that fit\", \"log\": \"$logs/budget_small.txt\""
    else
        bud=$(awk -v n="$need" 'BEGIN {printf "%.0f", n * 2e6 + 8e6}')
        STARPU_NCUDA=1 timeout -k 10 $(tl 60) "$build/sz-train" "${train[@]}" --mem-budget "$bud" >"$logs/budget_fit.json" 2>"$logs/budget_fit.err"
        rc_fit=$?
        dpeak=$(jnum device_peak_bytes "$logs/budget_fit.json") mpeak=$(jnum device_measured_peak_bytes "$logs/budget_fit.json")
        cused=$(jnum gpu_cuda_used_bytes "$logs/budget_fit.json") cstart=$(jnum gpu_cuda_used_at_start_bytes "$logs/budget_fit.json")
        fig="\"needs_mb\": $need, \"budget_bytes\": $bud, \"rc_fit\": $rc_fit, \"device_peak_bytes\": $dpeak"
        fig="$fig, \"device_measured_peak_bytes\": $mpeak, \"gpu_cuda_used_bytes\": $cused, \"gpu_cuda_used_at_start_bytes\": $cstart"
        # the engine's count and StarPU's allocations on the GPU (measured) both within the budget
        # (the run itself stops with an error if either went over: tasks/devwatch.c)
        ok=$(awk -v r="$rc_fit" -v p="$dpeak" -v q="$mpeak" -v b="$bud" \
            'BEGIN {print (r == 0 && p != "null" && q != "null" && p + 0 <= b + 0 && q + 0 <= b + 0) ? 1 : 0}')
        [ "$ok" = 1 ] && json budget pass "$fig" || fail_part budget "$fig, \"log\": \"$logs/budget_fit.err\""
    fi
fi

# ---- two ranks on one GPU with no --mem-budget: the free memory split, and a budget 2 ranks cannot fit ----
if go budget && ! share_skip budget_shared; then
    SZ_GPU_SHARE=1 STARPU_NCUDA=1 timeout -k 10 $(tl 60) mpiexec -n 2 "$root/scripts/gpu-rank.sh" "$build/sz-train" \
        "${train[@]}" --batch 2 >"$logs/budget_shared.json" 2>"$logs/budget_shared.err"
    rc_sh=$?
    grep '"gpu_budget"' "$logs/budget_shared.json" | head -1 >"$logs/budget_shared_line.json"
    k=$(jnum gpu_budget_sharers "$logs/budget_shared_line.json") per=$(jnum budget_per_rank_bytes "$logs/budget_shared_line.json")
    free=$(jnum gpu_free_at_start_bytes "$logs/budget_shared_line.json")
    mb=$(jnum mem_budget "$logs/budget_shared.json") mpeak=$(jnum device_measured_peak_bytes "$logs/budget_shared.json")
    big=$(awk -v f="$free" 'BEGIN {printf "%.0f", (f == "null" ? 1e12 : f) * 0.75}')
    SZ_GPU_SHARE=1 STARPU_NCUDA=1 timeout -k 10 $(tl 60) mpiexec -n 2 "$root/scripts/gpu-rank.sh" "$build/sz-train" \
        "${train[@]}" --batch 2 --mem-budget "$big" >"$logs/budget_big.txt" 2>&1
    rc_big=$?
    fig="\"rc\": $rc_sh, \"sharers\": $k, \"budget_per_rank_bytes\": $per, \"gpu_free_at_start_bytes\": $free"
    fig="$fig, \"mem_budget\": $mb, \"device_measured_peak_bytes\": $mpeak, \"rc_too_big\": $rc_big"
    ok=$(awk -v r="$rc_sh" -v k="$k" -v p="$per" -v f="$free" -v b="$mb" -v q="$mpeak" -v rb="$rc_big" \
        'BEGIN {print (r == 0 && k == 2 && p != "null" && 2 * p <= f + 0 && b != "null" && b + 0 <= p + 0 &&
                       q != "null" && q + 0 <= b + 0 && rb != 0) ? 1 : 0}')
    grep -q "driven by 2 ranks" "$logs/budget_big.txt" && ! grep -q '^{"step"' "$logs/budget_big.txt" || ok=0
    [ "$ok" = 1 ] && json budget_shared pass "$fig" || fail_part budget_shared "$fig, \"log\": \"$logs/budget_shared.err\""
fi

# ---- sz-bench d12 B8 T1024 bf16 on one GPU ----
if go bench; then
    STARPU_NCUDA=1 STARPU_WORKER_STATS=1 timeout -k 10 $(tl 150) "$build/sz-bench" "${bench_model[@]}" --precision bf16 \
        --steps 3 --warmup 1 --json >"$logs/bench.json" 2>"$logs/bench.err"
    rc=$?
    nt=$(cuda_tasks "$logs/bench.err")
    mfu=$(jnum mfu "$logs/bench.json") peak=$(jnum gpu_peak_tflops "$logs/bench.json") bpath=$(jnum bf16_path "$logs/bench.json")
    if [ $rc -eq 0 ] && [ "$nt" -gt 0 ] && [ "$mfu" != null ] && [ "$peak" != null ] && [ "$bpath" = native ]; then
        json bench pass "\"cuda_tasks\": $nt, \"bf16_path\": \"$bpath\", \"mfu\": $mfu, \"gpu_peak_tflops\": $peak, \"step_ms\": $(jnum step_ms "$logs/bench.json"), \"sz_bench\": $(tail -1 "$logs/bench.json")"
    else
        fail_part bench "\"rc\": $rc, \"cuda_tasks\": $nt, \"bf16_path\": \"$bpath\", \"mfu\": $mfu, \"gpu_peak_tflops\": $peak, \"note\": \"needs bf16_path native (the GPU rule on sm_80+), mfu and gpu_peak_tflops\", \"log\": \"$logs/bench.err\""
    fi
fi

# ---- the speed target: d12 B16 T1024 bf16 on one GPU, mfu >= 0.45; beside it the same run with
# STARPU_CUDA_PIPELINE=0 (each asynchronous codelet then followed by a stream synchronize, as StarPU
# does with blocking drivers without deps/starpu-1.3.10-cuda-pipeline.patch) ----
if go mfu_target; then
    mfu_model=(--model d12 --batch 16 --seq 1024) mfu_steps=(--steps 5 --warmup 2)
    [ "$ngpu" = dryrun ] || [ "$emulated" = 1 ] && mfu_model=("${bench_model[@]}") mfu_steps=(--steps 1 --warmup 1)
    fig="\"model\": \"${mfu_model[*]}\"" ran=1
    for pipe in default 0; do
        pv=$([ $pipe = 0 ] && echo STARPU_CUDA_PIPELINE=0)
        env $pv STARPU_NCUDA=1 STARPU_WORKER_STATS=1 \
            timeout -k 10 $(tl 120) "$build/sz-bench" "${mfu_model[@]}" --precision bf16 "${mfu_steps[@]}" --json \
            >"$logs/mfu_pipeline_$pipe.json" 2>"$logs/mfu_pipeline_$pipe.err"
        rc=$? nt=$(cuda_tasks "$logs/mfu_pipeline_$pipe.err")
        [ $rc -eq 0 ] && [ "$nt" -gt 0 ] || ran=0
        k=$([ $pipe = default ] && echo "" || echo pipeline0_)
        fig="$fig, \"${k}rc\": $rc, \"${k}cuda_tasks\": $nt"
        for v in mfu step_ms step_ms_min gpu_peak_tflops cuda_pipeline; do fig="$fig, \"$k$v\": $(jnum $v "$logs/mfu_pipeline_$pipe.json")"; done
    done
    mfu=$(jnum mfu "$logs/mfu_pipeline_default.json")
    fig="$fig, \"target\": 0.45, \"counts_toward_total\": false"
    queued=1
    if [ "$emulated" = 1 ]; then # the emulation's event queries answered "not ready": the CUDA worker
        # polling the tasks it queued ahead; as few with the pipeline as without means it queued none
        nr() { sed -n 's/.* \([0-9]*\) queries answered not ready.*/\1/p' "$1" | tail -1; }
        q2=$(nr "$logs/mfu_pipeline_default.err") q0=$(nr "$logs/mfu_pipeline_0.err")
        fig="$fig, \"not_ready_queries\": ${q2:-null}, \"pipeline0_not_ready_queries\": ${q0:-null}"
        [ -n "$q2" ] && [ -n "$q0" ] && [ "$q2" -gt "$q0" ] || queued=0
    fi
    if [ $ran = 0 ] || [ $queued = 0 ]; then
        fail_part mfu_target "$fig, \"note\": \"both runs must succeed on the GPU; emulated, the pipeline must queue tasks ahead (a StarPU without deps/starpu-1.3.10-cuda-pipeline.patch, or STARPU_CUDA_PIPELINE=0 set, queues none)\", \"log\": \"$logs/mfu_pipeline_*.err\""
    elif [ "$ngpu" = dryrun ] || [ "$emulated" = 1 ]; then
        json mfu_target skip "\"reason\": \"emulated: the timings are the emulation's, not a GPU's (both runs ran)\", $fig"
    else # a measured target, as the scheduler ranking: a miss is reported, it fails nothing
        json mfu_target "$(awk -v m="$mfu" 'BEGIN {print (m != "null" && m + 0 >= 0.45) ? "pass" : "fail"}')" "$fig"
    fi
fi

# ---- emulated: the bench's shape, the ends of every launch only ----
if [ "$emulated" = 1 ] && go shapes; then
    fig="\"model\": \"d12\", \"batch\": 8, \"seq\": 1024, \"blocks\": \"ends\"" ok=1
    for prec in bf16 fp32; do
        SZ_CUDA_EMU_BLOCKS=ends SZ_CUDA_EMU_PROTECT=0 STARPU_NCUDA=1 STARPU_WORKER_STATS=1 STARPU_BUS_STATS=1 \
            timeout -k 10 $(tl 300) "$build/sz-bench" \
            --model d12 --batch 8 --seq 1024 --precision $prec --steps 1 --warmup 0 --json \
            >"$logs/shapes_$prec.json" 2>"$logs/shapes_$prec.err"
        rc=$?
        nt=$(cuda_tasks "$logs/shapes_$prec.err")
        launches=$(sed -n 's/^cuda-emu: \([0-9]*\) launches of .*/\1/p' "$logs/shapes_$prec.err")
        d2h=$(awk -F'\t' '$2 == "CUDA 0 -> NUMA 0" {printf "%.0f", ($3 + 0) * 1024}' "$logs/shapes_$prec.err") # GiB -> MiB
        fig="$fig, \"${prec}_rc\": $rc, \"${prec}_cuda_tasks\": $nt, \"${prec}_launches\": ${launches:-0}, \"${prec}_d2h_mib\": ${d2h:-null}"
        [ $rc -eq 0 ] && [ "$nt" -gt 0 ] && [ -n "$launches" ] && [ -n "$d2h" ] && [ "$d2h" -le 16 ] || ok=0
    done
    [ "$ok" = 1 ] && json shapes pass "$fig" || fail_part shapes "$fig, \"log\": \"$logs/shapes_*.err\""
fi

# ---- the scheduler rows: zero against StarPU's dmdas, prio, lws (2 ranks sharing the GPU, stage 3),
# printed ranked (scripts/sched_rank.sh) once all have run ----
rows="$logs/sched_rows.jsonl"
: >"$rows"
nsched=0
for pol in zero dmdas prio lws; do
    go "sched_$pol" || continue
    share_skip "sched_$pol" && continue
    nsched=$((nsched + 1))
    SZ_GPU_SHARE=1 SZ_RANK_STATS="$logs/sched_$pol.err.stats" STARPU_SCHED=$pol STARPU_NCUDA=1 STARPU_WORKER_STATS=1 \
        timeout -k 10 $(tl 60) mpiexec -n 2 "$root/scripts/gpu-rank.sh" \
        "$build/sz-bench" "${sched_model[@]}" --precision bf16 --zero-stage 3 --steps 2 --warmup 1 --json \
        >"$logs/sched_$pol.json" 2>"$logs/sched_$pol.err"
    rc=$?
    ranks_stats "$logs/sched_$pol.err"
    nt=$(cuda_tasks "$logs/sched_$pol.err")
    fig="\"policy\": \"$pol\", \"ranks\": 2, \"rc\": $rc, \"cuda_tasks\": $nt"
    for k in step_ms device_peak_bytes device_measured_peak_bytes gpu_used_bytes peak_bytes overlap comm_task_s compute_task_s mfu sched_policy; do
        v=$(jnum $k "$logs/sched_$pol.json")
        case $v in null|[-0-9]*) fig="$fig, \"$k\": $v" ;; *) fig="$fig, \"$k\": \"$v\"" ;; esac
    done
    if [ $rc -eq 0 ] && [ "$nt" -gt 0 ]; then json "sched_$pol" pass "$fig" >>"$rows"
    else any_fail=1; json "sched_$pol" fail "$fig, \"log\": \"$logs/sched_$pol.err\"" >>"$rows"; fi
done
if [ $nsched -gt 0 ] && [ "$emulated" = 1 ]; then # the rows as they are: the emulation's timings rank nothing
    cat "$rows"
    json sched_ranking skip '"reason": "emulated: the timings are the emulation'"'"'s, not a GPU'"'"'s", "counts_toward_total": false'
elif [ $nsched -gt 0 ] && ! "$here/sched_rank.sh" "$rows"; then
    cat "$rows"
    fail_part sched_ranking "\"note\": \"scripts/sched_rank.sh failed on $rows\""
fi
if [ "$ngpu" = dryrun ] && go sched_ranking_canned; then
    canned="${SZ_GPU_CHECK_CANNED_ROWS:-$here/gpu-check-canned-rows.jsonl}"
    "$here/sched_rank.sh" "$canned" --prefix canned_ --summary sched_ranking_canned --canned ||
        fail_part sched_ranking_canned "\"note\": \"scripts/sched_rank.sh failed on $canned\""
fi
finish $any_fail
