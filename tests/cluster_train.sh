#!/usr/bin/env bash
# tests/cluster_train.sh — the multi-node path on a cluster of network namespaces (scripts/cluster.sh:
# 4 nodes, 2 slots each, links at 1 Gbit/s), sz-train on a tiny model (d2, 3 steps):
#  1. 2 nodes x 1 rank and 2 nodes x 2 ranks, stages 0-3: bitwise the losses and parameters of the
#     same ranks on one node (stage 0 there; every stage equals it, DESIGN §3); across nodes the
#     collectives go through MPI (TCP on the private subnet), on one node through shared memory;
#  2. bf16 at stage 3 and activation checkpointing at stage 3 on 2 x 2: bitwise the one-node run;
#  3. a state saved on 2 nodes x 2 ranks at step 2 resumes on 4 nodes x 1 rank to bitwise the
#     uninterrupted one-node run's step 3 (loss and parameters).
# Exit 77 (skipped) where network namespaces are not permitted.
# Usage: cluster_train.sh BUILD_DIR MPIEXEC
set -u
bin=$1 mpiexec=$2
root=$(cd "$(dirname "$0")/.." && pwd)
. "$(dirname "$0")/cli_common.sh"   # $dir, fail, the corpus $dir/lic_train.bin (or skipped)
export SZ_CLUSTER=szt$$ SZ_CLUSTER_OWNER=$$
cl() { "$root/scripts/cluster.sh" "$@"; }
trap 'cl down 2>/dev/null; rm -rf "$dir"' EXIT
cl up 4 --rate 1gbit --ranks-per-node 2
rc=$?
[ $rc -eq 0 ] || { [ $rc -eq 77 ] && exit 77; fail "cluster.sh up: exit $rc"; }
# StarPU's calibration for this machine (which the nodes share) made by one rank: ranks that start
# together on a machine without it race to write the same files
timeout 60 "$bin/sz-train" --config d2 --vocab 256 --max-seq 64 --train "$dir/lic_train.bin" --steps 1 >/dev/null 2>&1 ||
    fail "a one-rank run"

args=(--config d2 --vocab 256 --max-seq 64 --train "$dir/lic_train.bin" --batch 2 --seq 32 --lr 2e-3
      --grad-clip 1.0)
losses() { grep -o '^step .*: loss [0-9.]*' "$1"; }
# one NP ARGS...: NP ranks on this machine's own node; on LAYOUT NP ARGS...: on the cluster, LAYOUT
# 1 (one rank per node) or 2 (two per node)
one() { local np=$1; shift; timeout 90 "$mpiexec" -n "$np" "$bin/sz-train" "${args[@]}" "$@"; }
on() {
    local map=(--map-by node) np=$2
    [ "$1" = 2 ] && map=(-H "$(seq -f 'node%g:2' -s, $((np / 2)))")
    shift 2
    timeout 90 "$root/scripts/cluster.sh" run "${map[@]}" -np "$np" "$bin/sz-train" "${args[@]}" "$@"
}
# same LABEL A B: A's and B's losses and --save parameters are bitwise equal
same() {
    [ -n "$(losses "$2.json")" ] || { cat "$2.json"; fail "$1: no losses"; }
    cmp -s <(losses "$2.json") <(losses "$3.json") ||
        { paste <(losses "$2.json") <(losses "$3.json"); fail "$1: the losses differ"; }
    cmp -s "$2.bin" "$3.bin" || fail "$1: the parameters differ"
}

# the layouts: ranks placed on the nodes named, each node with a hostname of its own
[ "$(timeout 30 "$root/scripts/cluster.sh" run -H node1:2,node2:2 -np 4 hostname | sort | tr '\n' ' ')" = "node1 node1 node2 node2 " ] ||
    fail "2 x 2: the ranks are not on node1, node1, node2, node2"
[ "$(timeout 30 "$root/scripts/cluster.sh" run --map-by node -np 4 hostname | sort | tr '\n' ' ')" = "node1 node2 node3 node4 " ] ||
    fail "4 x 1: the ranks are not on node1..node4"
for np in 2 4; do
    one $np --steps 3 --save "$dir/ref$np.bin" >"$dir/ref$np.json" 2>&1 || { cat "$dir/ref$np.json"; fail "one node, $np ranks"; }
    grep -q "collectives through shared memory" "$dir/ref$np.json" || { cat "$dir/ref$np.json"; fail "one node: not shared memory"; }
done
t0=$(date +%s)
for k in 1 2; do
    np=$((2 * k))
    for stage in 0 1 2 3; do
        on $k $np --steps 3 --zero-stage $stage --save "$dir/c.bin" >"$dir/c.json" 2>&1 ||
            { cat "$dir/c.json"; fail "2 nodes x $k, stage $stage: exit non-zero"; }
        grep -q "collectives through MPI" "$dir/c.json" || { cat "$dir/c.json"; fail "2 nodes x $k: not through MPI"; }
        same "2 nodes x $k rank(s), stage $stage" "$dir/ref$np" "$dir/c"
    done
    echo "2 nodes x $k rank(s): stages 0-3 bitwise the one-node run ($np ranks)"
done

# bf16 and activation checkpointing, stage 3, 2 x 2 against one node
one 4 --steps 3 --zero-stage 3 --precision bf16 --save "$dir/rb.bin" >"$dir/rb.json" 2>&1 || { cat "$dir/rb.json"; fail "one node bf16"; }
on 2 4 --steps 3 --zero-stage 3 --precision bf16 --save "$dir/cb.bin" >"$dir/cb.json" 2>&1 || { cat "$dir/cb.json"; fail "2 x 2 bf16"; }
same "bf16, 2 x 2, stage 3" "$dir/rb" "$dir/cb"
on 2 4 --steps 3 --zero-stage 3 --checkpoint --save "$dir/ck.bin" >"$dir/ck.json" 2>&1 || { cat "$dir/ck.json"; fail "2 x 2 --checkpoint"; }
same "--checkpoint, 2 x 2, stage 3" "$dir/ref4" "$dir/ck"
echo "bf16 and --checkpoint at stage 3 on 2 nodes x 2 ranks: bitwise the one-node run"

# a state saved on 2 nodes x 2 ranks, resumed on 4 nodes x 1 rank
on 2 4 --steps 2 --zero-stage 3 --save-state "$dir/st" >"$dir/s1.json" 2>&1 || { cat "$dir/s1.json"; fail "save on 2 x 2"; }
on 1 4 --steps 3 --zero-stage 3 --resume "$dir/st" --save "$dir/r.bin" >"$dir/r.json" 2>&1 ||
    { cat "$dir/r.json"; fail "resume on 4 x 1"; }
grep -q "collectives through MPI" "$dir/r.json" || fail "4 x 1: not through MPI"
[ "$(losses "$dir/r.json" | tail -1)" = "$(losses "$dir/ref4.json" | tail -1)" ] && cmp -s "$dir/r.bin" "$dir/ref4.bin" ||
    fail "resumed on 4 x 1: step 3 loss $(losses "$dir/r.json" | tail -1) vs $(losses "$dir/ref4.json" | tail -1), or other parameters"
echo "saved on 2 nodes x 2 ranks, resumed on 4 nodes x 1: bitwise the uninterrupted run"
echo "cluster runs took $(($(date +%s) - t0)) s"
echo "cluster_train: all checks passed"
