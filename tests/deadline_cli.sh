#!/usr/bin/env bash
# tests/deadline_cli.sh — no collective waits forever (sched/deadline.c), through sz-train on 2 ranks:
#  1. one rank frozen (SIGSTOP) with --timeout 5 (5 s, or 5x the slowest step if a loaded machine made
#     one slower than 1 s): every rank is gone within 30 s, exit status non-zero,
#     and the survivor said which rank it waited for, in which collective, task and step; while it
#     waited it used little CPU (printed, not judged: the machine is shared). In both transports; through
#     MPI with the ranks named as on two nodes (SZ_HOST_NAME), the message names the node.
#  2. one rank killed (SIGKILL): the job is gone within 10 s, non-zero.
#  3. --timeout 0 waits: a rank frozen for 8 s and resumed lets the run finish normally.
#  4. a task that never ends (tests/test_watchdog.c, timeout 1 s): StarPU's watchdog, armed at twice the
#     timeout unless the user set STARPU_WATCHDOG_TIMEOUT, stops it within 15 s with our message.
# Usage: deadline_cli.sh BUILD_DIR MPIEXEC
set -u
bin=$1 mpiexec=$2
. "$(dirname "$0")/cli_common.sh"   # $dir, fail, the corpus $dir/lic_{train,val}.bin (or skipped)
mp=
cleanup() { # only what this script started: mpirun's own children, by pid
    if [ -n "$mp" ] && kill -0 "$mp" 2>/dev/null; then
        for k in $(pgrep -P "$mp"); do kill -CONT "$k" 2>/dev/null; kill -KILL "$k" 2>/dev/null; done
        kill -KILL "$mp" 2>/dev/null
    fi
    rm -rf "$dir"
}
trap cleanup EXIT

# start STEPS [ARGS]: a 2-rank run in the background; sets mp (mpirun's pid), r0, r1 (the ranks' pids)
start() {
    local steps=$1; shift
    rm -f "$dir/out.txt" # (not the last run's steps)
    local run=("$bin/sz-train" --config d2 --vocab 256 --max-seq 64 --train "$dir/lic_train.bin" --batch 4 \
        --seq 32 --steps "$steps" "$@")
    if [ -n "${TWO_NODES:-}" ]; then # each rank named as on a node of its own (SZ_HOST_NAME)
        "$mpiexec" -n 1 env SZ_HOST_NAME=nodeA "${run[@]}" : -n 1 env SZ_HOST_NAME=nodeB "${run[@]}" >"$dir/out.txt" 2>&1 &
    else
        "$mpiexec" -n 2 "${run[@]}" >"$dir/out.txt" 2>&1 &
    fi
    mp=$!
    for _ in $(seq 200); do # until the second step is printed (the deadline then is 5 s: steps are short)
        grep -q '^step    2/' "$dir/out.txt" 2>/dev/null && break
        kill -0 "$mp" 2>/dev/null || { cat "$dir/out.txt"; fail "the run ended early"; }
        sleep 0.1
    done
    r0= r1=
    for k in $(pgrep -P "$mp"); do
        case $(tr '\0' '\n' <"/proc/$k/environ" | sed -n 's/^OMPI_COMM_WORLD_RANK=//p') in
            0) r0=$k ;;
            1) r1=$k ;;
        esac
    done
    [ -n "$r0" ] && [ -n "$r1" ] || fail "cannot find the ranks' processes"
}

# gone_within SECONDS: waits for mpirun, at most SECONDS after t0 (set when the rank was hit); sets rc and took
gone_within() {
    local t1
    while kill -0 "$mp" 2>/dev/null && awk -v a="$t0" -v b="$(date +%s.%N)" -v l="$1" 'BEGIN { exit !(b - a < l) }'; do
        sleep 0.1
    done
    kill -0 "$mp" 2>/dev/null && { cat "$dir/out.txt"; fail "still running $1 s later"; }
    wait "$mp"
    rc=$?
    t1=$(date +%s.%N)
    took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    mp=
}

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

for coll in shm mpi; do
    export SZ_COLLECTIVES=$coll
    # through MPI, the ranks as on two nodes: the messages name the node of each rank
    if [ $coll = mpi ]; then TWO_NODES=1; else TWO_NODES=; fi
    start 100000 --timeout 5
    t0=$(date +%s.%N)
    kill -STOP "$r1"
    sleep 1
    c0=$(cpu_ticks "$r0")
    sleep 3
    c1=$(cpu_ticks "$r0" 2>/dev/null || echo "$c0")
    gone_within 30
    [ $rc -ne 0 ] || fail "$coll: a frozen rank, and the job exited 0"
    grep -q "deadline: rank 0${TWO_NODES:+ on nodeA} waited [0-9.]* s (the limit)" "$dir/out.txt" ||
        { cat "$dir/out.txt"; fail "$coll: no deadline message${TWO_NODES:+ naming the node}"; }
    grep -q "at step [0-9]* (collective #[0-9]* on the [a-z-]* stream)" "$dir/out.txt" ||
        { cat "$dir/out.txt"; fail "$coll: the message lacks the collective's step"; }
    # inside a task, the task names the unit (e.g. "rs:block1"); on the application thread, the loss
    if grep -q "on the task stream" "$dir/out.txt"; then
        grep -q "waited [0-9.]* s (the limit) in [a-z -]* (task [a-z0-9:_]*)" "$dir/out.txt" ||
            { cat "$dir/out.txt"; fail "$coll: the message lacks the task (unit)"; }
    fi
    grep -q "rank 1 (pid $r1): .*NO sign of life" "$dir/out.txt" ||
        { cat "$dir/out.txt"; fail "$coll: the message does not name the frozen rank 1"; }
    echo "frozen rank ($coll): gone after $took s, exit $rc; survivor's CPU while waiting: $(((c1 - c0) * 100 / $(getconf CLK_TCK) / 3))% of a core"
    grep "deadline:" -A1 "$dir/out.txt" | head -2 | cut -c1-240
done
unset SZ_COLLECTIVES TWO_NODES

start 100000
t0=$(date +%s.%N)
kill -KILL "$r1"
gone_within 10
[ $rc -ne 0 ] || fail "a killed rank, and the job exited 0"
echo "killed rank: gone after $took s, exit $rc"

# --timeout 0: no deadline; a rank frozen for 8 s then resumed, and the run completes
start 400 --timeout 0
kill -STOP "$r1"
sleep 8
kill -CONT "$r1"
t0=$(date +%s.%N)
gone_within 120
[ $rc -eq 0 ] || { cat "$dir/out.txt"; fail "--timeout 0: the run failed after a pause"; }
grep -q '^step  400/400' "$dir/out.txt" || { cat "$dir/out.txt"; fail "--timeout 0: the run did not finish"; }
echo "--timeout 0: an 8 s pause survived"

# the watchdog armed from the timeout (the test environment's own STARPU_WATCHDOG_TIMEOUT removed)
t0=$(date +%s.%N)
env -u STARPU_WATCHDOG_TIMEOUT -u STARPU_WATCHDOG_CRASH timeout 60 "$mpiexec" -n 1 "$bin/tests/test_watchdog" \
    >"$dir/wd.txt" 2>&1
rc=$?
took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$dir/wd.txt"; fail "a stuck task: exit $rc"; }
grep -q "error: watchdog: on rank 0 no task finished for 2 s at step 0" "$dir/wd.txt" ||
    { cat "$dir/wd.txt"; fail "a stuck task: no watchdog message"; }
awk -v t="$took" 'BEGIN { exit !(t < 15) }' || fail "a stuck task: stopped after $took s"
echo "stuck task: the watchdog stopped it after $took s, exit $rc"
