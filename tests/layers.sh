#!/usr/bin/env bash
# tests/layers.sh — the folders stack (shared/DESIGN.md §2): each sees only the folders below it.
# Bottom up: include/ (the public headers), graph/ and kernels/ (pure C, no StarPU), sched/ (the
# runtime and the policy: knows no operation), core/ (tensors, the task builder, the fold),
# codelets/ (the operations), tasks/ (the engine), train/ (the training loop as a library: state
# directories, signals, config, schedules; include/starzero_train.h), apps/. Fails, naming the file
# and the header, on a quoted #include of a header that lives in a folder at the same level or above.
# Usage: tests/layers.sh [SOURCE_DIR]
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 1
level() {
    case $1 in
    include) echo 0 ;; graph | kernels) echo 1 ;; sched) echo 2 ;; core) echo 3 ;;
    codelets) echo 4 ;; tasks) echo 5 ;; train) echo 6 ;; apps) echo 7 ;; *) echo -1 ;;
    esac
}
folders="include graph kernels sched core codelets tasks train apps"
# header name -> its top-level folder (apps' model headers are apps')
declare -A home
for f in $folders; do
    while IFS= read -r h; do
        home[$(basename "$h")]=$f
    done < <(find "$f" -name '*.h' -o -name '*.cuh')
done
bad=0 edges=0
for f in $folders; do
    lf=$(level "$f")
    while IFS= read -r src; do
        while IFS= read -r inc; do
            base=$(basename "$inc")
            to=${home[$base]:-}
            [ -n "$to" ] && [ "$to" != "$f" ] || continue
            edges=$((edges + 1))
            lt=$(level "$to")
            if [ "$lt" -ge "$lf" ]; then
                echo "layers: $src includes $inc ($to/), which is not below $f/" >&2
                bad=$((bad + 1))
            fi
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$src")
    done < <(find "$f" \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -not -path '*/build/*')
done
if [ "$bad" -gt 0 ]; then
    echo "layers: $bad include(s) against the layering (see the top of tests/layers.sh)" >&2
    exit 1
fi
echo "layers: $edges includes between folders, every one downward"
