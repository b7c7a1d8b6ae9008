#!/usr/bin/env bash
# scripts/setup.sh — one-command, idempotent set-up on Debian bookworm (run as root or with sudo).
#
#  1. installs the Debian packages StarZeRO needs (skipped when all are present);
#  2. builds StarPU 1.3.10 from Debian's own source package with FxT, StarPU-MPI, OpenMP,
#     blocking drivers, 128 CPU workers and CUDA (when nvcc is found), into a prefix under
#     $SZ_DEPS_DIR (default /opt/starzero) keyed by its configuration; a second run reuses it;
#  3. writes $SZ_DEPS_DIR/starpu.env, which the other scripts load.
#
# Use a site StarPU instead:  SZ_STARPU_PREFIX=/path/to/starpu scripts/setup.sh   (a prefix with
# lib/pkgconfig/starpu-1.3.pc or starpu-1.4.pc), or  SZ_STARPU=system  to take whatever
# `pkg-config starpu-1.4` / `starpu-1.3` finds on the current PKG_CONFIG_PATH.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PACKAGES=(build-essential cmake pkg-config dpkg-dev patch ca-certificates
          openmpi-bin libopenmpi-dev hwloc libhwloc-dev
          libopenblas-dev libdnnl-dev libcunit1-dev libfxt-dev libcjson-dev
          fortunes
          )

install_packages() {
    local missing=()
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    sz_log "installing Debian packages: ${missing[*]}"
    sz_root apt-get update -qq
    sz_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# A deb-src twin of every configured Debian 'deb' source (deb822 .sources files and one-line lists).
enable_deb_src() {
    local d=/etc/apt/sources.list.d out822=/etc/apt/sources.list.d/starzero-deb-src.sources
    local outlist=/etc/apt/sources.list.d/starzero-deb-src.list tmp
    tmp=$(mktemp)
    for f in "$d"/*.sources; do
        [ -f "$f" ] && [ "$f" != "$out822" ] || continue
        grep -qi 'debian' "$f" || continue
        # Types: deb [deb-src] -> Types: deb-src (one stanza per paragraph)
        awk 'BEGIN{RS="";ORS="\n\n"} /Types:[^\n]*deb( |\n|$)/ && /debian/ {sub(/Types:[^\n]*/,"Types: deb-src"); print}' "$f" >>"$tmp"
    done
    [ -s "$tmp" ] && sz_root cp "$tmp" "$out822"
    : >"$tmp"
    [ -f /etc/apt/sources.list ] && grep -E '^deb\s' /etc/apt/sources.list | sed 's/^deb\s/deb-src /' >>"$tmp" || true
    [ -s "$tmp" ] && sz_root cp "$tmp" "$outlist"
    rm -f "$tmp"
    sz_root apt-get update -qq
}

write_env() {   # $1 = PKG_CONFIG dir, $2 = prefix (may be empty for 'system')
    mkdir -p "$SZ_DEPS_DIR"
    {
        echo "# written by scripts/setup.sh — the StarPU StarZeRO builds against"
        echo "export SZ_STARPU_HOME='$2'"
        if [ -n "$1" ]; then echo "export PKG_CONFIG_PATH='$1'\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}"; fi
        if [ -n "$2" ]; then
            echo "export PATH='$2/bin':\$PATH"
            echo "export LD_LIBRARY_PATH='$2/lib'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
        fi
    } >"$SZ_DEPS_DIR/starpu.env"
}

use_site_starpu() {
    local pcdir="" pc
    if [ -n "${SZ_STARPU_PREFIX:-}" ]; then
        for pcdir in "$SZ_STARPU_PREFIX"/lib/pkgconfig "$SZ_STARPU_PREFIX"/lib64/pkgconfig \
                     "$SZ_STARPU_PREFIX"/lib/*/pkgconfig; do
            [ -d "$pcdir" ] && break
        done
        export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    fi
    for pc in starpu-1.4 starpu-1.3; do
        if pkg-config --exists "$pc" && pkg-config --exists "starpumpi-${pc#starpu-}"; then
            sz_log "using the site StarPU: $pc $(pkg-config --modversion "$pc") ($(pkg-config --variable=prefix "$pc"))"
            write_env "$pcdir" "$(pkg-config --variable=prefix "$pc")"
            return 0
        fi
    done
    sz_die "no starpu-1.4/starpu-1.3 with StarPU-MPI found by pkg-config (PKG_CONFIG_PATH=${PKG_CONFIG_PATH:-}); unset SZ_STARPU/SZ_STARPU_PREFIX to build our own"
}

build_starpu() {
    local cuda_dir="" flags key prefix src build
    if command -v nvcc >/dev/null 2>&1; then cuda_dir=$(dirname "$(dirname "$(command -v nvcc)")")
    elif [ -x /usr/local/cuda/bin/nvcc ]; then cuda_dir=/usr/local/cuda; fi
    flags="--with-fxt=/usr --enable-maxcpus=128 --enable-blocking-drivers --enable-openmp
           --disable-build-examples --disable-build-tests --disable-build-doc --disable-fortran
           --disable-opencl --disable-socl --disable-starpufft --disable-starpurm --disable-static"
    [ -n "$cuda_dir" ] && flags="$flags --enable-cuda --with-cuda-dir=$cuda_dir"
    key=$( { echo "$SZ_STARPU_VERSION $flags"; cat "$SZ_ROOT"/deps/starpu-*.patch; } | sha256sum | cut -c1-12)
    prefix="$SZ_DEPS_DIR/starpu-$SZ_STARPU_VERSION-$key"
    if [ -f "$prefix/.sz-complete" ]; then
        sz_log "StarPU $SZ_STARPU_VERSION cached in $prefix"
        write_env "$prefix/lib/pkgconfig" "$prefix"
        return 0
    fi
    sz_log "building StarPU $SZ_STARPU_VERSION into $prefix (CUDA: ${cuda_dir:-no}); this takes a few minutes"
    src="$SZ_DEPS_DIR/src"
    mkdir -p "$src"
    if ! ls "$src"/starpu_"$SZ_STARPU_VERSION"*.dsc >/dev/null 2>&1; then
        apt-cache showsrc starpu 2>/dev/null | grep -q "^Version: $SZ_STARPU_VERSION" || enable_deb_src
        (cd "$src" && apt-get source --download-only "starpu=$(apt-cache showsrc starpu | awk '/^Version: '"$SZ_STARPU_VERSION"'/{print $2; exit}')" >/dev/null 2>&1) \
            || sz_die "apt-get source starpu failed: is a Debian bookworm source entry configured?"
    fi
    build="$SZ_DEPS_DIR/build-$key"
    rm -rf "$build"
    dpkg-source -x "$(ls "$src"/starpu_"$SZ_STARPU_VERSION"*.dsc | head -1)" "$build" >/dev/null 2>&1
    # deps/: the CUDA 13 fixes and the CUDA pipeline with blocking drivers (inert without CUDA), and
    # the idle-workers-sleep option
    for p in "$SZ_ROOT"/deps/starpu-"$SZ_STARPU_VERSION"-*.patch; do
        (cd "$build" && patch -s -p1 <"$p") || sz_die "patch $p does not apply"
    done
    # shellcheck disable=SC2086
    (cd "$build" && ./configure --prefix="$prefix" $flags >configure.log 2>&1) \
        || { tail -30 "$build/configure.log"; sz_die "StarPU configure failed (log: $build/configure.log)"; }
    (cd "$build" && make -j"$(nproc)" >make.log 2>&1 && make install >install.log 2>&1) \
        || { tail -30 "$build/make.log"; sz_die "StarPU build failed (log: $build/make.log)"; }
    grep -q '#define STARPU_USE_FXT 1' "$prefix"/include/starpu/1.3/starpu_config.h \
        || sz_die "the StarPU build has no FxT: see $build/configure.log"
    touch "$prefix/.sz-complete"
    rm -rf "$build"
    write_env "$prefix/lib/pkgconfig" "$prefix"
    sz_log "StarPU installed in $prefix"
}

install_packages
if [ -n "${SZ_STARPU_PREFIX:-}" ] || [ "${SZ_STARPU:-}" = system ]; then use_site_starpu; else build_starpu; fi
