#!/usr/bin/env bash
# tests/cluster_faults.sh — faults across nodes on a cluster of network namespaces (scripts/cluster.sh:
# 2 nodes x 2 ranks, links at 1 Gbit/s), sz-train on a tiny model (d2, stage 3, --timeout 5, a state
# saved every 2 steps):
#  1. node2's link cut mid-step: every rank on both nodes ends within the timeout + 10 s, non-zero;
#     node1's ranks say, naming their node, rank, collective and step, that every rank on their node is
#     alive and waiting, so what holds them up is on node2 (ranks 2-3); the last saved state resumes;
#  2. node2 frozen (every process on it stopped): node1's ranks end the same way;
#  3. node2 killed (it loses power: link first, then every process): node1's ranks end the same way;
#  4. node2's link at 50 Mbit/s is not taken for dead: the run finishes, later, with the losses of
#     the run at 1 Gbit/s;
#  5. node2's link cut for 2 s and back, within the timeout: nothing is lost (exit 0, the same losses);
#  6. across nodes, the start-up agreement (another --seed on node2) names each value's rank and node,
#     and a rank failing alone on node2 ends the job within 10 s with "rank 1 on node2 left the job
#     ... while rank 0 on node1 waited in <collective>".
# Exit 77 (skipped) where network namespaces are not permitted.
# Usage: cluster_faults.sh BUILD_DIR MPIEXEC
set -u
bin=$1
root=$(cd "$(dirname "$0")/.." && pwd)
. "$(dirname "$0")/cli_common.sh"   # $dir, fail, the corpus $dir/lic_train.bin (or skipped)
export SZ_CLUSTER=szf$$ SZ_CLUSTER_OWNER=$$
cl() { "$root/scripts/cluster.sh" "$@"; }
trap 'cl down 2>/dev/null; rm -rf "$dir"' EXIT
cl up 2 --rate 1gbit --ranks-per-node 2
rc=$?
[ $rc -eq 0 ] || { [ $rc -eq 77 ] && exit 77; fail "cluster.sh up: exit $rc"; }
# StarPU's calibration for this machine (which the nodes share) made by one rank: ranks that start
# together on a machine without it race to write the same files
timeout 60 "$bin/sz-train" --config d2 --vocab 256 --max-seq 64 --train "$dir/lic_train.bin" --steps 1 >/dev/null 2>&1 ||
    fail "a one-rank run"

args=(--config d2 --vocab 256 --max-seq 64 --train "$dir/lic_train.bin" --batch 2 --seq 32 --lr 2e-3
      --grad-clip 1.0 --zero-stage 3)
losses() { grep -o '^step .*: loss [0-9.]*' "$1"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
ranks_on() { # K: how many sz-train processes run on node K
    local p n=0
    for p in $(cl pids "$1"); do grep -q sz-train "/proc/$p/cmdline" 2>/dev/null && n=$((n + 1)); done
    echo $n
}
mp=
start() { # ARGS...: 4 ranks (2 per node) in the background, until step 2 is printed
    rm -f "$dir/out.txt"
    cl run -np 4 "$bin/sz-train" "${args[@]}" "$@" >"$dir/out.txt" 2>&1 &
    mp=$!
    for _ in $(seq 600); do
        grep -q '^step    2/' "$dir/out.txt" 2>/dev/null && return
        kill -0 "$mp" 2>/dev/null || { cat "$dir/out.txt"; fail "the run ended early"; }
        sleep 0.1
    done
    cat "$dir/out.txt"; fail "no step 2 within 60 s"
}
# survivors_end LABEL: node1's ranks gone within the timeout + 10 s of t0, with the message; then the
# cluster's processes removed (mpirun may wait for node2 forever, as for a lost machine)
survivors_end() {
    while [ "$(ranks_on 1)" != 0 ] && [ "$(since "$t0" | cut -d. -f1)" -lt 15 ]; do sleep 0.1; done
    [ "$(ranks_on 1)" = 0 ] || { cat "$dir/out.txt"; fail "$1: node1's ranks still run $(since "$t0") s later"; }
    took=$(since "$t0")
    sleep 0.5 # (their last output through mpirun)
    for r in 0 1; do
        grep -q "deadline: rank $r on node1 waited [0-9.]* s (the limit) in [a-z -]*.* at step [0-9]* (collective #" "$dir/out.txt" ||
            { cat "$dir/out.txt"; fail "$1: no deadline message from rank $r naming node1 and the collective"; }
    done
    for r in 0 1; do # (one message per stream that waited: the task one, the application thread's)
        grep -A3 "deadline: rank $r on node1" "$dir/out.txt" |
            grep -q "rank(s) on other nodes (ranks 2-3 on node2): every rank on this node is alive and waiting" ||
            { cat "$dir/out.txt"; fail "$1: rank $r does not say the wait is for ranks 2-3 on node2"; }
    done
    echo "$1: node1's ranks ended after $took s:"
    grep -m1 -A3 "deadline: rank 0" "$dir/out.txt" | cut -c1-220
}
# a new mpirun for the next case: the last one's processes (and a dead node) removed
reset() {
    kill -KILL "$mp" 2>/dev/null; wait "$mp" 2>/dev/null; mp=
    cl down >/dev/null 2>&1
    cl up 2 --rate 1gbit --ranks-per-node 2 >/dev/null 2>&1 || fail "cluster.sh up again"
}

# the reference: 8 steps at 1 Gbit/s
timeout 90 "$root/scripts/cluster.sh" run -np 4 "$bin/sz-train" "${args[@]}" --steps 8 >"$dir/ref.txt" 2>&1 ||
    { cat "$dir/ref.txt"; fail "the reference run"; }

# 1. link cut; the last saved state resumes
start --steps 100000 --timeout 5 --save-state "$dir/st" --save-every 2
cl link 2 down
t0=$(now)
survivors_end "node2's link cut"
[ "$(ranks_on 2)" = 0 ] || fail "link cut: node2's ranks still run (they time out too)"
last=$(readlink "$dir/st/latest" 2>/dev/null || ls "$dir/st" | grep '^step-' | tail -1)
[ -n "$last" ] || fail "link cut: no saved state"
reset
timeout 60 "$root/scripts/cluster.sh" run -np 4 "$bin/sz-train" "${args[@]}" --steps 100000 --timeout 5 \
    --resume "$dir/st" --steps $((10#${last#step-} + 1)) >"$dir/res.txt" 2>&1 ||
    { cat "$dir/res.txt"; fail "link cut: the last saved state ($last) does not resume"; }
echo "link cut: the last saved state ($last) resumed"

# 2. node frozen
reset
start --steps 100000 --timeout 5
cl freeze 2
t0=$(now)
survivors_end "node2 frozen"

# 3. node killed
reset
start --steps 100000 --timeout 5
cl kill 2
t0=$(now)
survivors_end "node2 killed"

# 4. a slow link is not a dead one
reset
cl rate 2 50mbit
t0=$(now)
timeout 120 "$root/scripts/cluster.sh" run -np 4 "$bin/sz-train" "${args[@]}" --steps 8 --timeout 2 >"$dir/slow.txt" 2>&1 ||
    { cat "$dir/slow.txt"; fail "50 Mbit/s: the run failed"; }
cmp -s <(losses "$dir/ref.txt") <(losses "$dir/slow.txt") || fail "50 Mbit/s: other losses"
echo "50 Mbit/s with --timeout 2: finished in $(since "$t0") s (steps: $(grep -o '[0-9.]* ms' "$dir/slow.txt" | tail -3 | tr '\n' ' ')), the same losses"

# 5. a link back within the timeout: a run long enough that the cut surely lands inside it, stopped
# cleanly (SIGUSR1 to a rank) past step 40; its first 40 losses are the reference run's
reset
timeout 90 "$root/scripts/cluster.sh" run -np 4 "$bin/sz-train" "${args[@]}" --steps 40 >"$dir/ref40.txt" 2>&1 ||
    { cat "$dir/ref40.txt"; fail "the 40-step reference run"; }
steploss() { sed -n 's|^step *\([0-9]*\)/[0-9]*: loss \([0-9.]*\).*|\1 \2|p' "$1" | head -40; }
start --steps 100000 --timeout 10
cl link 2 down
sleep 2
cl link 2 up
t0=$(now)
while kill -0 "$mp" 2>/dev/null && ! grep -q '^step *4[0-9]/' "$dir/out.txt" &&
    [ "$(since "$t0" | cut -d. -f1)" -lt 60 ]; do sleep 0.1; done
kill -0 "$mp" 2>/dev/null || { cat "$dir/out.txt"; fail "link back: the run ended"; }
grep -q '^step *4[0-9]/' "$dir/out.txt" || { cat "$dir/out.txt"; fail "link back: no step 40 within 60 s"; }
for p in $(cl pids 1); do # one rank's signal stops every rank after its step (exit 0)
    grep -q sz-train "/proc/$p/cmdline" 2>/dev/null && { kill -USR1 "$p"; break; }
done
wait "$mp" || { cat "$dir/out.txt"; fail "link back: the run failed or did not stop cleanly"; }
mp=
cmp -s <(steploss "$dir/ref40.txt") <(steploss "$dir/out.txt") || { cat "$dir/out.txt"; fail "link back: other losses"; }
# the cut stalled a step
slowest=$(grep -o '^step .* [0-9.]* ms' "$dir/out.txt" | awk '{ if ($(NF - 1) > m) m = $(NF - 1) } END { print m + 0 }')
awk -v m="$slowest" 'BEGIN { exit !(m >= 1000) }' || { cat "$dir/out.txt"; fail "link back: no step waited for the link"; }
echo "link cut for 2 s and back: the run finished with the same losses (its slowest step $slowest ms)"
# 6. the start-up agreement and a rank that fails alone, one rank on each node
reset
a1=(-H node1 -np 1 "$bin/sz-train" "${args[@]}" --steps 50)
timeout 60 "$root/scripts/cluster.sh" run "${a1[@]}" --seed 1 : -H node2 -np 1 "$bin/sz-train" "${args[@]}" --steps 50 \
    --seed 2 >"$dir/agree.txt" 2>&1 && { cat "$dir/agree.txt"; fail "different seeds on two nodes: exit 0"; }
grep -q "the ranks disagree on --seed: 1 on rank 0 (on node1); 2 on rank 1 (on node2)" "$dir/agree.txt" ||
    { cat "$dir/agree.txt"; fail "the agreement's message does not name the nodes"; }
echo "agreement across nodes: $(grep -m1 -o 'the ranks disagree.*' "$dir/agree.txt")"
t0=$(now)
timeout 60 "$root/scripts/cluster.sh" run "${a1[@]}" --precision bf16 : -H node2 -np 1 env SZ_TEST_FAIL_ROUND_SCRATCH=1 \
    "$bin/sz-train" "${args[@]}" --steps 50 --precision bf16 >"$dir/leave.txt" 2>&1 &&
    { cat "$dir/leave.txt"; fail "a rank failing alone: exit 0"; }
took=$(since "$t0")
awk -v t="$took" 'BEGIN { exit !(t < 10) }' || { cat "$dir/leave.txt"; fail "a rank failing alone: the job took $took s"; }
grep -q "rank 1 on node2 left the job (.*) while rank 0 on node1 waited in [a-z -]*.* at step [0-9]* (the [a-z-]* stream)" "$dir/leave.txt" ||
    { cat "$dir/leave.txt"; fail "a rank failing alone: the message does not name both nodes and the collective"; }
echo "a rank failing alone on node2: the job ended in $took s: $(grep -m1 -o 'rank 1 on node2 left the job' "$dir/leave.txt") ..."
echo "cluster_faults: all checks passed"
