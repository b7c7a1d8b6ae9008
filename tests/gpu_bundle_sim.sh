#!/usr/bin/env bash
# tests/gpu_bundle_sim.sh — the GPU bundle (scripts/gpu-bundle.sh) on a simulated bare image,
# without a GPU: in a private mount namespace (unshare -m, as root) Open MPI, PMIx, StarPU
# (/opt/starzero), hwloc, libevent, cJSON, oneDNN, OpenBLAS, FxT, CUnit and every other library the
# bundle carries are hidden (empty folders and /dev/null bound over them; the CUDA libraries stay,
# as on the GPU machine; libgomp too, so that the bundle's lib/compat serves), which the normal
# build's sz-train failing to start proves; then, from the
# unpacked bundle alone: sz-info, sz-prepare, a 1-rank and a 2-rank CPU-only d2 training through
# the bundle's mpiexec (STARPU_NCUDA=0; stages 0 and 3 on 2 ranks bitwise equal), gpu-check.sh
# --bundle up to "no GPU" (exit 77, its prereq passing), and its dry run (SZ_GPU_CHECK_DRYRUN=1) of
# the d2 parts and the 2-rank stages through the bundle (which fail for want of a CUDA worker, but
# every run in them must have exited 0; SZ_SIM_DRY_PARTS=a,b,... selects other parts: with all of
# them every run goes through the bundle too, about a minute, and only the CPU-only failures remain).
#   tests/gpu_bundle_sim.sh BUILD_DIR [BUNDLE]
# BUILD_DIR: a normal build (shown unable to start inside); with BUNDLE (e.g. the real one,
# .gpu-bundle/sz-gpu.tar.xz of scripts/gpu-bundle.sh) that bundle is run, else a quick one is packed
# from BUILD_DIR itself (SZ_BUNDLE_PREBUILT, xz -1: about 10 s; BUILD_DIR must be a CUDA build):
# that is what ctest runs (gpu_bundle_sim, about 35 s). Exits 77 (skipped) when not root, when
# unshare -m is refused, or when BUILD_DIR has no CUDA and no BUNDLE is given.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
normal="$(realpath -m "${1:?usage: gpu_bundle_sim.sh BUILD_DIR [BUNDLE]}")"
bundle="${2:+$(realpath -m "$2")}"
fail() { echo "FAIL: $*"; exit 1; }

if [ "${SZ_SIM_INNER:-0}" != 1 ]; then
    [ "$(id -u)" = 0 ] || { echo "skipped: needs root (a private mount namespace)"; exit 77; }
    unshare -m --propagation private true 2>/dev/null || { echo "skipped: unshare -m refused here"; exit 77; }
    if [ -z "$bundle" ]; then
        grep -q '^SZ_USE_CUDA:BOOL=ON' "$normal/CMakeCache.txt" 2>/dev/null ||
            { echo "skipped: $normal is not a CUDA build and no bundle was given"; exit 77; }
        tmpb=$(mktemp -d)
        trap 'rm -rf "$tmpb"' EXIT
        SZ_BUNDLE_PREBUILT="$normal" SZ_BUNDLE_XZ="-1 -T2" "$root/scripts/gpu-bundle.sh" "$tmpb/sz-gpu.tar.xz" \
            >"$tmpb/pack.log" 2>&1 || fail "scripts/gpu-bundle.sh from $normal: $(tail -5 "$tmpb/pack.log")"
        bundle="$tmpb/sz-gpu.tar.xz"
    fi
    [ -f "$bundle" ] || fail "no bundle $bundle (make it: scripts/gpu-bundle.sh)"
    SZ_SIM_INNER=1 unshare -m --propagation private bash "$0" "$normal" "$bundle"
    exit $?
fi

# ---- inside the namespace: hide what the bare image lacks ----
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
empty="$work/empty"
mkdir -p "$empty" "$work/u"
tar -C "$work/u" -xJf "$bundle" || fail "cannot unpack $bundle"
B="$work/u/sz-gpu"
[ -f "$B/MANIFEST" ] || fail "no MANIFEST in $bundle"
hide_dir() { [ -d "$1" ] && mount --bind "$empty" "$1"; }
hide_file() { [ -e "$1" ] && mount --bind /dev/null "$1"; }
for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/lib/x86_64-linux-gnu/hwloc \
    /usr/share/openmpi /etc/openmpi /opt/starzero; do hide_dir "$d"; done
# every library the bundle carries (lib/ and lib/compat/ are the image's own where it has them: only
# lib/), by name and by any other version of that name; and Open MPI's programs
for f in "$B"/lib/*.so*; do
    stem=$(basename "$f" | sed 's/\.so.*//')
    for g in /usr/lib/x86_64-linux-gnu/"$stem".so* /usr/lib/x86_64-linux-gnu/"$stem"-*.so*; do hide_file "$g"; done
done
for g in /usr/lib/x86_64-linux-gnu/{libmpi,libopen-rte,libopen-pal,liboshmem,libmca_common_,libevent,libpmix}*.so* \
    /usr/bin/{mpiexec,mpirun,orterun,orted,ompi_info,opal_wrapper,mpicc}*; do hide_file "$g"; done
# libgomp too, as an image without GCC's OpenMP runtime would be: the bundle's lib/compat serves
hide_file /usr/lib/x86_64-linux-gnu/libgomp.so.1
hash -r
for lib in libmpi.so.40 libopen-pal.so.40 libpmix.so.2 libhwloc.so.15 libdnnl.so.2 libcjson.so.1 libfxt.so.2 libcunit.so.1 libevent_core-2.1.so.7; do
    [ -s "/usr/lib/x86_64-linux-gnu/$lib" ] && fail "/usr/lib/x86_64-linux-gnu/$lib still visible"
done
# shown hidden: no mpiexec on PATH, and the normal build's sz-train cannot start
command -v mpiexec >/dev/null 2>&1 && [ -s "$(command -v mpiexec)" ] && fail "mpiexec still visible: $(command -v mpiexec)"
if [ -x "$normal/sz-train" ]; then
    out=$("$normal/sz-train" --help 2>&1)
    rc=$?
    [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "error while loading shared libraries" ||
        fail "the normal build's sz-train still starts (rc $rc): the libraries are not hidden: $(printf '%s' "$out" | head -2)"
    echo "hidden: the normal build's sz-train fails to start: $(printf '%s' "$out" | head -1)"
else
    echo "note: no normal build at $normal: skipping the proof that the libraries are hidden"
fi

# ---- the bundle alone ----
. "$root/scripts/gpu-bundle-env.sh"
sz_bundle_env "$B"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
    OMPI_MCA_btl_vader_single_copy_mechanism=none STARPU_SILENT=1 STARPU_FXT_TRACE=0 STARPU_HOME="$work/starpu-home"
[ "$(command -v mpiexec)" = "$B/mpi/bin/mpiexec" ] || fail "mpiexec is not the bundle's: $(command -v mpiexec)"
[ "$SZ_BUNDLE_COMPAT" = 1 ] || fail "libgomp hidden, but the bundle's lib/compat is not on the path"
sz-info >"$work/info.txt" 2>&1 || fail "sz-info from the bundle: $(tail -5 "$work/info.txt")"
echo "sz-info: ok ($(grep -m1 -i starpu "$work/info.txt"))"
sz-prepare --out-dir "$work" --prefix chk "$B"/data/* >"$work/prep.log" 2>&1 || fail "sz-prepare: $(tail -3 "$work/prep.log")"
train=(--config d2 --vocab 256 --max-seq 64 --train "$work/chk_train.bin" --batch 2 --seq 64 --steps 5 --lr 1e-3 --json)
losses() { grep '"loss"' "$1" | sed 's/.*"loss": \([-0-9.e]*\).*/\1/'; }
STARPU_NCUDA=0 timeout -k 10 120 mpiexec -n 1 sz-train "${train[@]}" >"$work/r1.json" 2>"$work/r1.err" ||
    fail "1-rank d2 through the bundle's mpiexec: $(tail -5 "$work/r1.err")"
[ "$(losses "$work/r1.json" | wc -l)" = 5 ] || fail "1-rank: not 5 steps: $(tail -3 "$work/r1.json")"
echo "1 rank: losses $(losses "$work/r1.json" | tr '\n' ' ')"
for st in 0 3; do
    STARPU_NCUDA=0 timeout -k 10 180 mpiexec -n 2 sz-train "${train[@]}" --zero-stage $st >"$work/r2_$st.json" 2>"$work/r2_$st.err" ||
        fail "2-rank d2 (stage $st) through the bundle's mpiexec: $(tail -5 "$work/r2_$st.err")"
    [ "$(losses "$work/r2_$st.json" | wc -l)" = 5 ] || fail "2 ranks stage $st: not 5 steps"
done
[ "$(losses "$work/r2_0.json")" = "$(losses "$work/r2_3.json")" ] || fail "2 ranks: stage 3 not bitwise stage 0"
echo "2 ranks: stages 0 and 3 bitwise equal: $(losses "$work/r2_3.json" | tr '\n' ' ')"

# ---- gpu-check.sh --bundle: prereq passes, then "no GPU" (77); then its dry run ----
( unset OPAL_PREFIX LD_LIBRARY_PATH; PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v "^$B" | paste -sd:)
  SZ_GPU_LOG="$work/logs77" timeout -k 10 120 "$root/scripts/gpu-check.sh" --bundle "$bundle" >"$work/chk77.out" 2>"$work/chk77.err"
  echo $? >"$work/chk77.rc" )
[ "$(cat "$work/chk77.rc")" = 77 ] || fail "gpu-check --bundle without a GPU: exit $(cat "$work/chk77.rc"), not 77: $(cat "$work/chk77.out" "$work/chk77.err")"
grep -q '"part": "prereq", "result": "pass"' "$work/chk77.out" || fail "gpu-check --bundle: prereq did not pass: $(cat "$work/chk77.out")"
grep -q '"part": "gpu", "result": "skip"' "$work/chk77.out" || fail "gpu-check --bundle: no 'no GPU' line"
echo "gpu-check --bundle: exit 77; $(grep '"prereq"' "$work/chk77.out")"
( unset OPAL_PREFIX LD_LIBRARY_PATH; PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v "^$B" | paste -sd:)
  SZ_GPU_CHECK_DRYRUN=1 SZ_GPU_CHECK_PARTS=${SZ_SIM_DRY_PARTS:-d2_losses,zero_fold,stages,sched_ranking_canned} SZ_GPU_LOG="$work/logsdry" \
      timeout -k 10 400 "$root/scripts/gpu-check.sh" --bundle "$bundle" >"$work/dry.out" 2>"$work/dry.err"
  echo $? >"$work/dry.rc" )
cat "$work/dry.out"
[ "$(cat "$work/dry.rc")" = 1 ] || fail "dry run: exit $(cat "$work/dry.rc"), expected 1 (no CUDA task): $(tail -5 "$work/dry.err")"
grep -q '"part": "build", "result": "pass", "from": "bundle"' "$work/dry.out" || fail "dry run: no build line from the bundle"
grep '"part": "d2_losses"' "$work/dry.out" | grep -q '"steps": 5, "cuda_tasks": 0' || fail "dry run: d2_losses did not run both d2 trainings"
grep '"part": "stages"' "$work/dry.out" | grep -q '"stage0_rc": 0, .*"stage1_rc": 0, .*"stage2_rc": 0, .*"stage3_rc": 0' ||
    fail "dry run: a 2-rank stage run failed through the bundle's mpiexec"
grep '"part": "zero_fold"' "$work/dry.out" | grep -q '"rc": 0, ' || fail "dry run: the zero_fold run failed"
grep -q '"part": "sched_ranking_canned", "result": "pass"' "$work/dry.out" || fail "dry run: the canned ranking"
echo "gpu_bundle_sim: ok (the bundle runs with Open MPI, StarPU & co. hidden)"
