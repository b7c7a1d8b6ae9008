# scripts/gpu-bundle-env.sh — the environment that runs StarZeRO from an unpacked GPU bundle
# (scripts/gpu-bundle.sh): sourced, never run; `sz_bundle_env DIR` (DIR: the bundle's top folder,
# sz-gpu/) exports, for this shell and the processes it starts only:
#   PATH             DIR/bin (the programs, starpu_machine_display), DIR/mpi/bin (mpiexec, orted)
#   LD_LIBRARY_PATH  DIR/lib; DIR/lib/compat only where the machine lacks one of its libraries
#                    (libstdc++, libgcc_s, libgomp, libz: a newer one of the machine's serves);
#                    then the CUDA libraries the machine has: /usr/local/cuda/lib64 (the toolkit),
#                    the driver's /usr/local/nvidia/lib64, the pip wheels' nvidia/*/lib folders
#                    (python3, when it has the nvidia packages); the caller's LD_LIBRARY_PATH last
#   OPAL_*           Open MPI 4.1 relocated into DIR/mpi (Open MPI passes them on to PMIx as PMIX_*:
#                    a PMIX_ variable of the same directory set to another value is an error there,
#                    so none is set here and a caller's are unset)
# and sets SZ_BUNDLE_CUDA_DIRS (the CUDA folders found, ':'-separated; empty if none) and
# SZ_BUNDLE_COMPAT (1 when lib/compat is on the path, else 0).
sz_bundle_env() {
    local b=$1 d lib ld="" cuda="" py
    SZ_BUNDLE_COMPAT=0
    ld="$b/lib"
    for lib in libstdc++.so.6 libgcc_s.so.1 libgomp.so.1 libz.so.1; do # (the path the loader's cache names, not empty)
        d=$(/sbin/ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')
        if [ -z "$d" ] || [ ! -s "$d" ]; then ld="$ld:$b/lib/compat"; SZ_BUNDLE_COMPAT=1; break; fi
    done
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
        [ -d "$d" ] && cuda="$cuda:$d"
    done
    # the pip wheels (nvidia-cublas, nvidia-nccl-cu13, ...): nvidia/<name>/lib and nvidia/cu13/lib
    py=$(command -v python3 2>/dev/null) && d=$("$py" - 2>/dev/null <<'PY'
import glob, os
try:
    import nvidia
except Exception:
    raise SystemExit
dirs = sorted({os.path.dirname(p) for q in nvidia.__path__ for p in glob.glob(os.path.join(q, "*", "lib", "lib*.so*"))})
print(":".join(dirs))
PY
) && [ -n "$d" ] && cuda="$cuda:$d"
    SZ_BUNDLE_CUDA_DIRS="${cuda#:}"
    export PATH="$b/bin:$b/mpi/bin:$PATH"
    export LD_LIBRARY_PATH="$ld$cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    local m="$b/mpi"
    export OPAL_PREFIX="$m" OPAL_EXEC_PREFIX="$m" OPAL_BINDIR="$m/bin" OPAL_LIBDIR="$b/lib" \
        OPAL_PKGLIBDIR="$m/lib/openmpi3" OPAL_DATAROOTDIR="$m/share" OPAL_DATADIR="$m/share" \
        OPAL_PKGDATADIR="$m/share/openmpi" OPAL_SYSCONFDIR="$m/etc"
    unset PMIX_INSTALL_PREFIX PMIX_PREFIX PMIX_EXEC_PREFIX PMIX_BINDIR PMIX_LIBDIR PMIX_PKGLIBDIR PMIX_DATAROOTDIR \
        PMIX_DATADIR PMIX_PKGDATADIR PMIX_SYSCONFDIR
}
