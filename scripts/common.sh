# scripts/common.sh — paths and helpers shared by setup.sh, build.sh, test.sh, demo.sh, trace.sh.
# Sourced, never run. Everything cached lives outside the work tree (SZ_DEPS_DIR).

SZ_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SZ_DEPS_DIR="${SZ_DEPS_DIR:-/opt/starzero}"          # StarPU builds, downloaded sources
SZ_BUILD_DIR="${SZ_BUILD_DIR:-$SZ_ROOT/build}"       # CMake build tree (git-ignored)
SZ_STARPU_VERSION=1.3.10

sz_log() { printf '[starzero] %s\n' "$*" >&2; }
sz_die() { printf '[starzero] error: %s\n' "$*" >&2; exit 1; }

# Run a command as root: directly when we are root, else through sudo.
sz_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# mpirun flags that work everywhere we test: as root Open MPI needs an explicit
# allowance; on a 2-core machine 4 ranks need --oversubscribe.
sz_mpirun_flags() {
    local f="--oversubscribe"
    [ "$(id -u)" = 0 ] && f="$f --allow-run-as-root"
    printf '%s' "$f"
}

# awk with scripts/json.awk's JSON readers (jok, jraw, jget, jisnum, jnumfmt) loaded before PROGRAM:
# sz_jawk PROGRAM [FILE...] (the one JSON parser of the scripts; no Python, no jq).
sz_jawk() {
    local prog=$1
    shift
    awk -f "$SZ_ROOT/scripts/json.awk" -f <(printf '%s\n' "$prog") "$@"
}

# Load the environment of the StarPU chosen by setup.sh (PKG_CONFIG_PATH, PATH, LD_LIBRARY_PATH).
sz_load_env() {
    local envfile="$SZ_DEPS_DIR/starpu.env"
    [ -f "$envfile" ] || sz_die "no $envfile: run scripts/setup.sh first"
    # shellcheck disable=SC1090
    . "$envfile"
}
