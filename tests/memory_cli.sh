#!/usr/bin/env bash
# tests/memory_cli.sh — memory checked against the machine by default (sched/memory.c):
#  1. with no --mem-budget, a model too large for this node (GPT-2 48,25,1600 with GPT-2's vocabulary:
#     1.5B parameters, ~27 GB at stage 0) is refused before any step, in under 10 s, naming the
#     machine's share as the budget (skipped where the node has more than 26 GB available);
#  2. on three sizes with GPT-2's 50257-token vocabulary (d2, 4,4,256, 6,6,384; one rank, B2 T64, 2
#     steps) the measured peak is the plan's prediction (host buffers included: the data loader and
#     the matmul kernels' working memory, which stays within what was counted) and the process's peak
#     resident set stays within the budget plus the runtime allowance (SZ_RUNTIME_ALLOWANCE_BYTES,
#     reported as runtime_allowance_bytes): with the machine's budget, and with --save under the
#     prediction as --mem-budget (the tightest budget accepted);
#  3. one byte less is refused before any step, in under 10 s, "needs X" printed above "budget Y";
#  4. bounds before allocation: a model no node could hold, huge plans, a budget above the node (below).
# Usage: memory_cli.sh BUILD_DIR
set -u
bin=$1
. "$(dirname "$0")/cli_common.sh"   # $dir, fail, the corpus $dir/lic_{train,val}.bin (or skipped)

avail=$(awk '/^MemAvailable:/ { printf "%.0f", $2 * 1024 }' /proc/meminfo)
if [ "${avail:-0}" -lt 26000000000 ]; then
    t0=$(date +%s.%N)
    if timeout 60 "$bin/sz-train" --config 48,25,1600 --vocab 50257 --train "$dir/lic_train.bin" --steps 2 \
        >"$dir/big.txt" 2>&1; then
        cat "$dir/big.txt"; fail "a 1.5B-parameter model was accepted on a node with $avail bytes available"
    fi
    t1=$(date +%s.%N)
    grep -q "memory budget: the plan needs .* (no budget given: this rank's share of the memory this node has" \
        "$dir/big.txt" || { cat "$dir/big.txt"; fail "the refusal does not say the budget is the machine's"; }
    grep -q '^step' "$dir/big.txt" && fail "a step ran before the refusal"
    took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    awk -v t="$took" 'BEGIN { exit !(t < 10) }' || fail "the refusal took $took s (>= 10 s)"
    echo "too large for the machine: refused in $took s: $(grep -m1 'memory budget' "$dir/big.txt" | cut -c1-200)..."
else
    echo "skipped the too-large model: $avail bytes available here"
fi

# 2.-3. three sizes with GPT-2's vocabulary (the 50257-row table dominates the host buffers init and
# --save used to build): without a budget (the machine's) the plan's prediction is the measured peak
# and the resident set stays within it plus the allowance; with --save and the prediction itself as
# --mem-budget (the tightest budget accepted) the same holds against the budget, and one byte less is
# refused before any step, in under 10 s, with "needs X" printed above "the budget is Y".
for c in d2 4,4,256 6,6,384; do
    args=(--config $c --max-seq 64 --train "$dir/lic_train.bin" --batch 2 --seq 64 --steps 2 --json)
    "$bin/sz-train" "${args[@]}" >"$dir/fit.json" 2>"$dir/fit.err" || { cat "$dir/fit.err"; fail "$c: run failed"; }
    pred=$(tail -1 "$dir/fit.json" | sed 's/.*"predicted_peak_bytes": \([0-9]*\).*/\1/')
    "$bin/sz-train" "${args[@]}" --save "$dir/m.bin" --mem-budget "$pred" >"$dir/save.json" 2>"$dir/save.err" ||
        { cat "$dir/save.err"; fail "$c: --save under a budget of the prediction ($pred) failed"; }
    # (scripts/json.awk through jawk; no Python) the last line of each run's JSON
    { tail -1 "$dir/fit.json"; tail -1 "$dir/save.json"; } | jawk '
        function need(r, k,   v) {
            v = jraw(r, k)
            if (!JF || !jisnum(v)) { printf "FAIL: %s: no number \"%s\" in: %s\n", C, k, r; bad = 1; exit 1 }
            return v + 0
        }
        { R[NR] = $0 }
        END {
            if (bad) exit 1
            if (NR != 2 || !jok(R[1]) || !jok(R[2])) { print "FAIL: " C ": the last lines are not two JSON reports"; exit 1 }
            ok = 1
            for (i = 1; i <= 2; i++) {
                r = R[i]; what = i == 1 ? "machine budget" : "--save, --mem-budget = prediction"
                rss = need(r, "rss_peak_bytes"); pred = need(r, "predicted_peak_bytes"); peak = need(r, "peak_bytes")
                allow = need(r, "runtime_allowance_bytes"); budget = need(r, "mem_budget"); mach = need(r, "budget_from_machine")
                host = need(r, "host_buffer_bytes"); mm = need(r, "matmul_host_peak_bytes"); node = need(r, "starpu_node_peak_bytes")
                if (peak != pred) { printf "FAIL: measured peak %.0f is not the prediction %.0f: %s\n", peak, pred, r; exit 1 }
                if (mm > host) { print "FAIL: matmul working memory over the host buffers: " r; exit 1 }
                # StarPU main-RAM allocations, sampled as a GPU rank device node is (tasks/devwatch.c)
                if (node < 0) { print "FAIL: StarPU allocations were not sampled: " r; exit 1 }
                jraw(r, "device_measured_peak_bytes"); if (JF) { print "FAIL: a GPU figure on a CPU run: " r; exit 1 }
                limit = mach ? pred + allow : budget + allow
                printf "%s, %s: rss peak %.1f MiB <= %s %.1f MiB + allowance %.1f MiB (host buffers %.2f MiB, matmul measured %.2f)\n", \
                    C, what, rss / 2^20, mach ? "prediction" : "budget", (mach ? pred : budget) / 2^20, allow / 2^20, \
                    host / 2^20, mm / 2^20
                if (!(rss <= limit)) ok = 0
            }
            if (!(budget == pred && !mach)) { print "FAIL: the --save run is not under a budget of the prediction: " r; exit 1 }
            exit !ok
        }' C="$c" || fail "$c: resident set over the budget plus the allowance"
done
t0=$(date +%s.%N)
if "$bin/sz-train" "${args[@]}" --mem-budget $((pred - 1)) >"$dir/short.txt" 2>&1; then
    fail "6,6,384: a budget one byte under the prediction was accepted"
fi
t1=$(date +%s.%N)
grep -q '^{"step"' "$dir/short.txt" && fail "a step ran before the refusal"
grep -o "needs [0-9.]* MB per rank.*the budget is [0-9.]* MB" "$dir/short.txt" | head -1 |
    awk '{ x = $2; y = $NF == "MB" ? $(NF-1) : $NF; exit !(x + 0 > y + 0) }' ||
    { cat "$dir/short.txt"; fail "the refusal one byte short does not print needs > budget"; }
awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 10) }' || fail "the refusal took 10 s or more"
echo "one byte short: refused in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s: $(grep -o 'needs [0-9.]* MB' "$dir/short.txt" | head -1) vs $(grep -o 'budget is [0-9.]* MB' "$dir/short.txt" | head -1)"

# 4. bounds before allocation (each in well under the test's timeout, no step, no crash):
#  - a model whose states alone exceed the node (99,999 layers; GPT-2 and LLaMA) is refused while its
#    units are declared, before any tensor, naming the N_d the ZeRO formula would need;
#  - a budget too small for a model in 4-byte buckets (d2: every element of a shard its own
#    reduce-scatter round at N_d >= 2) gets the budget's advice from a bounded search;
#  - a --mem-budget above the node's memory is refused naming both;
#  - sz-estimate of 100000,100000,1000000 (a plan of billions of bucket rounds) answers, printing
#    "-" where no plan can be built, without allocating what it estimates.
bounded() { # NAME TIMEOUT PATTERN sz-train args...
    local name=$1 t=$2 pat=$3
    shift 3
    if timeout "$t" "$bin/sz-train" "$@" --vocab 256 --max-seq 64 --seq 32 --batch 2 --train "$dir/lic_train.bin" \
        --steps 1 >"$dir/$name.txt" 2>&1; then
        cat "$dir/$name.txt"; fail "$name: accepted"
    fi
    [ "$(grep -c '^step' "$dir/$name.txt")" = 0 ] || fail "$name: a step ran before the refusal"
    grep -q "$pat" "$dir/$name.txt" || { cat "$dir/$name.txt"; fail "$name: no '$pat' in the refusal (or timed out)"; }
    echo "$name: $(grep -m1 -o "$pat.\{0,160\}" "$dir/$name.txt")"
}
bounded layers 60 "model states alone, even at stage 3 with this job.s N_d 1 .*need N_d >= [0-9]* at stage 3" --config 99999,12,768
bounded llama_layers 60 "model states alone" --arch llama --config 99999,12,768
bounded big_plans 60 "memory budget: the plan needs .*Settings that fit" --config d2 --mem-budget 8M --bucket-bytes 4
bounded huge_blocks 60 "model states alone" --config 10,1,99999
bounded over_node 60 "mem-budget .* MB per rank is more than this node's memory" --config d2 --mem-budget 1000000G
timeout 60 "$bin/sz-estimate" --model 100000,100000,1000000 --json >"$dir/est_huge.json" 2>&1 ||
    { tail -5 "$dir/est_huge.json"; fail "sz-estimate --model 100000,100000,1000000 failed or timed out"; }
grep -q '"largest_unit_elems"' "$dir/est_huge.json" || fail "sz-estimate --model 100000,100000,1000000: no answer"
echo "sz-estimate 100000,100000,1000000: answered"
