#!/usr/bin/env bash
# tests/memory_cli.sh — memory checked against the machine by default (sched/memory.c):
#  1. with no --mem-budget, a model too large for this node (GPT-2 48,25,1600 with GPT-2's vocabulary:
#     1.5B parameters, ~27 GB at stage 0) is refused before any step, in under 10 s, naming the
#     machine's share as the budget (skipped where the node has more than 26 GB available);
#  2. the process's measured peak resident set stays within the plan's prediction plus the runtime
#     allowance (SZ_RUNTIME_ALLOWANCE_BYTES, reported as runtime_allowance_bytes) on three sizes, one
#     rank, and the JSON report carries rss_peak_bytes and the machine's budget.
# Usage: memory_cli.sh BUILD_DIR
set -u
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
texts=$(ls /usr/share/common-licenses/{GPL-3,Apache-2.0} 2>/dev/null)
[ -n "$texts" ] || { echo "skipped: no text corpus"; exit 77; }
"$bin/sz-prepare" --out-dir "$dir" --prefix lic $texts >/dev/null || fail "sz-prepare"

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

for c in d2 4,4,256 6,6,384; do
    "$bin/sz-train" --config $c --vocab 256 --max-seq 64 --train "$dir/lic_train.bin" --batch 4 --seq 64 --steps 2 \
        --json >"$dir/fit.json" 2>"$dir/fit.err" || { cat "$dir/fit.err"; fail "$c: run failed"; }
    python3 - "$c" "$dir/fit.json" <<'PY' || fail "$c: resident set over the prediction plus the allowance"
import json, sys
r = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
rss, pred, allow = r["rss_peak_bytes"], r["predicted_peak_bytes"], r["runtime_allowance_bytes"]
assert r["budget_from_machine"] == 1 and r["mem_budget"] >= pred, r
print("%s: rss peak %.1f MiB <= predicted %.1f + allowance %.1f MiB (the runtime took %.1f)"
      % (sys.argv[1], rss / 2**20, pred / 2**20, allow / 2**20, (rss - pred) / 2**20))
sys.exit(0 if rss <= pred + allow else 1)
PY
done
