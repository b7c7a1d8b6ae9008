#!/usr/bin/env bash
# scripts/gpu-bundle.sh — build, on a development machine (Debian bookworm, CUDA 13, the StarPU of
# scripts/setup.sh built WITH CUDA), what scripts/gpu-check.sh runs, and pack it into ONE file that
# travels to a bare GPU machine (a CUDA image without Open MPI, hwloc, cJSON, oneDNN, FxT or
# StarPU, and without a network): `scripts/gpu-check.sh --bundle FILE` runs the check from it.
#
#   scripts/gpu-bundle.sh [OUT]        OUT default .gpu-bundle/sz-gpu.tar.xz (git-ignored)
# SZ_BUNDLE_PREBUILT=DIR packs an existing CUDA build dir instead of building (its -march read from
# its CMakeCache: a -march=native build runs only on CPUs like this one; the simulation test uses
# it with the test's own build), SZ_BUNDLE_XZ (default -9) the xz options (-1 -T2: seconds, larger).
#
# The build: build dir $SZ_BUNDLE_BUILD_DIR (default ./build-gpu-bundle), Release, CUDA with
# -Werror for sm_80 and sm_90 (A100, H100/H200; $SZ_BUNDLE_CUDA_ARCH, a CMake list: no GPU here to
# pick "native"), the C code for -march=$SZ_BUNDLE_MARCH (default x86-64-v3: AVX2/FMA, which every
# host of such a GPU has; -march=native would tie the binaries to this CPU), only the targets the
# check runs (sz-train, sz-bench, sz-prepare, sz-info, tests/test_cuda_kernels).
# The file (tar.xz) holds, under one top folder sz-gpu/:
#   sz-train sz-bench sz-prepare sz-info tests/test_cuda_kernels   the programs (gpu-check's $build)
#   lib/          every shared library they (and the bundled Open MPI and its plugins) need that is
#                 not glibc's own and not a CUDA library the GPU machine has (libcuda, cudart, cublas,
#                 cublasLt, nccl, cusparse, nvJitLink: the toolkit's and the pip wheels'): StarPU,
#                 StarPU-MPI, Open MPI, PMIx, hwloc, libevent, cJSON, oneDNN, OpenBLAS, FxT, ...
#   lib/compat/   libraries every glibc system has in some version (libstdc++, libgcc_s, libgomp,
#                 libz): gpu-check puts them on the path only where the machine lacks them
#   mpi/          a relocatable Open MPI 4.1 (Debian's): bin/ (mpiexec, mpirun, orterun, orted),
#                 lib/openmpi3/ (its MCA plugins and PMIx's, one folder: Open MPI hands its
#                 OPAL_PKGLIBDIR to PMIx), share/openmpi/ (help files of both), etc/ (the MCA
#                 parameter files); used through OPAL_PREFIX and the OPAL_* directory variables
#                 (scripts/gpu-bundle-env.sh, which the bundle carries too)
#   data/         the training text the check prepares (the three license texts of this machine)
#   MANIFEST      commit (and "-dirty" if the tree had changes), date, glibc the binaries need,
#                 -march, CUDA architectures, nvcc version
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
out="${1:-$SZ_ROOT/.gpu-bundle/sz-gpu.tar.xz}"
bdir="${SZ_BUNDLE_BUILD_DIR:-$SZ_ROOT/build-gpu-bundle}"
march="${SZ_BUNDLE_MARCH:-x86-64-v3}"
if [ -n "${SZ_BUNDLE_PREBUILT:-}" ]; then
    bdir="$SZ_BUNDLE_PREBUILT"
    grep -q '^SZ_USE_CUDA:BOOL=ON' "$bdir/CMakeCache.txt" 2>/dev/null || sz_die "$bdir is not a CUDA build (SZ_USE_CUDA=ON)"
    march=$(sed -n 's/^SZ_MARCH:STRING=//p' "$bdir/CMakeCache.txt"); march=${march:-native}
fi
archs="${SZ_BUNDLE_CUDA_ARCH:-80;90}"
if [ -n "${SZ_BUNDLE_PREBUILT:-}" ]; then # (absent from the cache: the CMakeLists default)
    archs=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$bdir/CMakeCache.txt"); archs=${archs:-80;90}
fi
targets=(sz-train sz-bench sz-prepare sz-info test_cuda_kernels)

sz_load_env
command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || sz_die "no nvcc (CUDA toolkit) on this machine"
cfgh=$(ls "${SZ_STARPU_HOME:-/usr}"/include/starpu/1.*/starpu_config.h 2>/dev/null | head -1)
grep -q '^#define STARPU_USE_CUDA 1' "${cfgh:-/dev/null}" ||
    sz_die "the StarPU of $SZ_DEPS_DIR/starpu.env (${SZ_STARPU_HOME:-system}) is not built with CUDA: rerun scripts/setup.sh where nvcc is found"

# ---- build ----
t0=$(date +%s)
if [ -z "${SZ_BUNDLE_PREBUILT:-}" ]; then
sz_log "building for the bundle in $bdir (CUDA $archs, -march=$march); minutes with CUDA"
mkdir -p "$bdir"
cmake -S "$SZ_ROOT" -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DSZ_USE_CUDA=ON -DSZ_WERROR=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$archs" -DSZ_MARCH="$march" >"$bdir/configure.log" 2>&1 ||
    { tail -30 "$bdir/configure.log"; sz_die "cmake configure failed (log: $bdir/configure.log)"; }
cmake --build "$bdir" -j"${SZ_BUNDLE_JOBS:-2}" --target "${targets[@]}" >"$bdir/build.log" 2>&1 ||
    { tail -40 "$bdir/build.log"; sz_die "build failed (log: $bdir/build.log)"; }
sz_log "built in $(($(date +%s) - t0)) s"
fi
for t in "${targets[@]}"; do
    f="$bdir/$t"; [ "$t" = test_cuda_kernels ] && f="$bdir/tests/$t"
    [ -x "$f" ] || sz_die "$f was not built"
done
[ "${SZ_BUNDLE_BUILD_ONLY:-0}" = 1 ] && exit 0

# ---- stage the files ----
stage=$(mktemp -d "${TMPDIR:-/tmp}/sz-gpu-bundle.XXXXXX")
trap 'rm -rf "$stage"' EXIT
top="$stage/sz-gpu"
ompi_lib=/usr/lib/x86_64-linux-gnu/openmpi/lib
ompi_pkglib=$ompi_lib/openmpi3
pmix_dir=/usr/lib/x86_64-linux-gnu/pmix2
for d in "$ompi_pkglib" /usr/share/openmpi /etc/openmpi "$pmix_dir/lib/pmix" "$pmix_dir/share/pmix"; do
    [ -d "$d" ] || sz_die "no $d: the bundle packs Debian bookworm's Open MPI 4.1 (openmpi-bin, libopenmpi3, libpmix2)"
done
mkdir -p "$top/bin/tests" "$top/lib/compat" "$top/mpi/bin" "$top/mpi/lib/openmpi3" "$top/mpi/share/openmpi" "$top/mpi/etc" "$top/data"
progs=(sz-train sz-bench sz-prepare sz-info)
for p in "${progs[@]}"; do cp "$bdir/$p" "$top/bin/"; done
cp "$bdir/tests/test_cuda_kernels" "$top/bin/tests/"
cp "$SZ_STARPU_HOME/bin/starpu_machine_display" "$top/bin/" 2>/dev/null || true   # what StarPU sees (a diagnostic)
# Open MPI: the launcher (orterun; mpiexec and mpirun are its names), orted, ompi_info
cp -L /usr/bin/orterun /usr/bin/orted /usr/bin/ompi_info "$top/mpi/bin/"
ln -s orterun "$top/mpi/bin/mpiexec"
ln -s orterun "$top/mpi/bin/mpirun"
# its plugins, less those for fabrics a single GPU machine has no use for and whose libraries
# (UCX, libfabric, PSM, verbs, OpenSHMEM, netlink) would triple the bundle: Open MPI skips a
# component that is not there; Debian's own openmpi-mca-params.conf already turns most of them off
fabric='libucp|libucs|libuct|libucm|libfabric|libpsm|libinfinipath|libibverbs|librdmacm|libefa|liboshmem|libnl-|libmca_common_(ucx|ofi|verbs)'
dropped=""
for f in "$ompi_pkglib"/*.so; do
    if ldd "$f" 2>/dev/null | grep -Eq "^[[:space:]]*($fabric)"; then dropped="$dropped $(basename "$f" .so)"; continue; fi
    cp "$f" "$top/mpi/lib/openmpi3/"
done
cp "$pmix_dir"/lib/pmix/*.so "$top/mpi/lib/openmpi3/"   # PMIx's (pmix_mca_*): Open MPI hands PMIx its OPAL_PKGLIBDIR
cp -r /usr/share/openmpi/. "$top/mpi/share/openmpi/"
for f in "$pmix_dir"/share/pmix/*; do   # PMIx's help files beside Open MPI's (PMIx gets OPAL_PKGDATADIR too)
    [ -e "$top/mpi/share/openmpi/$(basename "$f")" ] && sz_die "help file $(basename "$f") in both Open MPI and PMIx"
    cp "$f" "$top/mpi/share/openmpi/"
done
cp /etc/openmpi/openmpi-mca-params.conf /etc/openmpi/openmpi-default-hostfile "$top/mpi/etc/"
# the training text the check prepares (the same bytes as on this machine: the same losses)
for t in GPL-3 LGPL-3 Apache-2.0; do cp "/usr/share/common-licenses/$t" "$top/data/" 2>/dev/null || true; done

# ---- the shared libraries: ldd's closure of every ELF file above, less glibc and the CUDA
# libraries the GPU machine has (its driver's libcuda; the toolkit's and the pip wheels' others) ----
glibc='ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libmvec\.so\.1|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libutil\.so\.1|libresolv\.so\.2|libanl\.so\.1|libnsl\.so\.1|libBrokenLocale\.so\.1|libnss_[a-z]*\.so\.2|libthread_db\.so\.1'
cudalibs='libcuda\.so\.1|libcudart\.so\.[0-9]*|libcublas\.so\.[0-9]*|libcublasLt\.so\.[0-9]*|libnccl\.so\.[0-9]*|libcusparse\.so\.[0-9]*|libnvJitLink\.so\.[0-9]*'
compat='libstdc\+\+\.so\.6|libgcc_s\.so\.1|libgomp\.so\.1|libz\.so\.1'
elfs=$(find "$top/bin" "$top/mpi/bin" "$top/mpi/lib" -type f | while read -r f; do
    [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] && echo "$f"; done)
deps=$(for f in $elfs; do LD_LIBRARY_PATH="$ompi_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$f"; done |
    awk '$2 == "=>" { print $1 "\t" $3 }' | sort -u)
nf=$(printf '%s\n' "$deps" | awk -F'\t' '$2 == "not" { print $1 }' | sort -u | tr '\n' ' ')
[ -z "$nf" ] || sz_die "libraries not found on this machine (ldd): $nf"
printf '%s\n' "$deps" | while IFS=$'\t' read -r name path; do
    [ -n "$name" ] || continue
    if printf '%s' "$name" | grep -Eqx "$glibc|$cudalibs"; then continue; fi
    case "$path" in /usr/local/cuda*|*/nvidia/*)
        sz_die "$name ($path) is a CUDA library not on the list of those the GPU machine has: bundle it or add it to cudalibs" ;;
    esac
    if printf '%s' "$name" | grep -Eqx "$compat"; then cp -L "$path" "$top/lib/compat/$name"
    else cp -L "$path" "$top/lib/$name"; fi
done
# StarPU's libraries carry their debug information (autotools' -g): not needed to run
strip --strip-debug "$top"/lib/libstarpu*.so* 2>/dev/null || true

# ---- what the check's prerequisites compare: the newest glibc symbol version any file needs, the
# CPU features of -march ----
glibc_needed=$(for f in $elfs "$top"/lib/*.so* "$top"/lib/compat/*.so*; do objdump -T "$f" 2>/dev/null; done |
    grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -t. -k1,1n -k2,2n -k3,3n -u | tail -1)
case "$march" in
    x86-64-v2) cpu_flags="sse4_2 popcnt ssse3" ;;
    x86-64-v3) cpu_flags="sse4_2 popcnt avx avx2 bmi1 bmi2 f16c fma movbe" ;;
    x86-64-v4) cpu_flags="sse4_2 popcnt avx avx2 bmi1 bmi2 f16c fma movbe avx512f avx512bw avx512cd avx512dq avx512vl" ;;
    *) cpu_flags="$(grep -m1 '^flags' /proc/cpuinfo | sed 's/^flags[[:space:]]*:[[:space:]]*//')"
       sz_log "-march=$march: the bundle needs this machine's CPU features (all of them are listed)" ;;
esac
commit=$(git -C "$SZ_ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
git -C "$SZ_ROOT" diff --quiet HEAD -- 2>/dev/null || commit="$commit-dirty"
{
    echo "commit=$commit"
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
    echo "glibc_built=$(getconf GNU_LIBC_VERSION | awk '{print $2}')"
    echo "glibc_needed=$glibc_needed"
    echo "march=$march"
    echo "cpu_flags=$cpu_flags"
    echo "cuda_archs=$archs"
    echo "nvcc=$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | awk '{print $2}')"
    echo "starpu=$SZ_STARPU_HOME"
    echo "mpi=$(orterun --version 2>/dev/null | head -1)"
    echo "programs=${progs[*]} tests/test_cuda_kernels"
    echo "cuda_libs_expected=libcuda.so.1 libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2 libcusparse.so.12 libnvJitLink.so.13"
    echo "mpi_plugins_dropped=${dropped# }"
} >"$top/MANIFEST"

# ---- pack: one xz stream (-9: a 64 MiB window, in which the programs' common CUDA code repeats) ----
mkdir -p "$(dirname "$out")"
# shellcheck disable=SC2086
tar -C "$stage" -cf - sz-gpu | xz ${SZ_BUNDLE_XZ:--9} >"$out.tmp"
mv "$out.tmp" "$out"
sz_log "bundle $out: $(du -h "$out" | cut -f1) ($(du -sh "$top" | cut -f1) unpacked), commit $commit, glibc >= $glibc_needed"
