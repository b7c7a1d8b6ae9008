#!/usr/bin/env bash
# tests/emu_orders.sh PROGRAM — runs a test on the host emulation of a GPU (tests/cuda_emu) in the
# forward and in the reverse thread and block order (SZ_CUDA_EMU_ORDER) at the same time: each run
# is one thread (a block's threads are fibers), so on two cores both orders take the time of one.
# Prints each order's output under its name; exits 0 when both passed, else 1 (a run killed by a
# signal counts as failed).
set -u
prog=$1
dir=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$dir"' EXIT
for order in forward reverse; do
    SZ_CUDA_EMU_ORDER=$order "$prog" > "$dir/$order" 2>&1 &
    pids+=($!)
done
rc=0
i=0
for order in forward reverse; do
    wait "${pids[$i]}"
    r=$?
    i=$((i + 1))
    echo "=== $order order: exit $r"
    cat "$dir/$order"
    [ "$r" -eq 0 ] || rc=1
done
exit $rc
