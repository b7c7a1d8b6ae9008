#!/usr/bin/env bash
# scripts/kernels-oldnew.sh [REV] — the CPU kernels of git revision REV (default main) against this
# working tree's, bitwise (scripts/kernels_oldnew.c): for a change that restructures a
# kernel's loops and must keep its bits. Builds both trees' kernels with the Release flags into a
# temporary directory (removed at the end) and prints "N checks, M differ" (exit 1 if any differ).
# A tool, not a test: it needs the git history and takes ~10 s.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rev=${1:-main}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/old"
# the kernels are kernels/ since the layering (issue 33), codelets/kernels/ before it
if git -C "$root" cat-file -e "$rev:kernels" 2>/dev/null; then
    git -C "$root" archive "$rev" kernels | tar -x -C "$tmp/old"
else
    git -C "$root" archive "$rev" codelets/kernels | tar -x -C "$tmp/old"
    mv "$tmp/old/codelets/kernels" "$tmp/old/kernels"
fi
files="bf16_act bf16 attention attention_amx layernorm gelu residual softmax_xent encoder rmsnorm rope embedding silu mul"
so() { # so SRCROOT OUT
    local k=$1/kernels srcs=()
    for f in $files; do srcs+=("$k/$f.c"); done
    gcc -O3 -march=native -fno-math-errno -fopenmp -fPIC -shared -Wl,-Bsymbolic -I"$k" "${srcs[@]}" -lm -o "$2"
}
so "$tmp/old" "$tmp/old.so"
so "$root" "$tmp/new.so"
gcc -O2 -fopenmp -I"$root/kernels" "$root/scripts/kernels_oldnew.c" -ldl -o "$tmp/oldnew"
"$tmp/oldnew" "$tmp/old.so" "$tmp/new.so" "${@:2}"
