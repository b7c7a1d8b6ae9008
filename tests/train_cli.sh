#!/usr/bin/env bash
# tests/train_cli.sh — sz-prepare and sz-train end to end, one rank:
#  1. the loss falls on real English text (the licence texts every Debian system ships);
#  2. fp32 training is deterministic: bitwise the same losses and saved parameters across runs
#     and across STARPU_NCPU values;
#  3. bad files (wrong magic, truncated, shape mismatch) give a clear error naming the file.
# Usage: train_cli.sh BUILD_DIR
set -u
bin=$1
corpus="GPL-3 LGPL-3 Apache-2.0 MPL-2.0 Artistic GFDL-1.3"
. "$(dirname "$0")/cli_common.sh"   # $dir, fail, the corpus $dir/lic_{train,val}.bin (or skipped)

train() { "$bin/sz-train" --config d2 --vocab 256 --max-seq 64 --train "$dir/lic_train.bin" --val "$dir/lic_val.bin" \
          --batch 4 --seq 32 --lr 2e-3 --wd 0.1 --grad-clip 1.0 --json "$@"; }

# 1. loss falls
train --steps 60 >"$dir/fall.json" || fail "sz-train exited non-zero"
first=$(grep -m1 '"loss"' "$dir/fall.json" | sed 's/.*"loss": \([0-9.]*\).*/\1/')
last=$(grep '"loss"' "$dir/fall.json" | tail -10 | sed 's/.*"loss": \([0-9.]*\).*/\1/' | awk '{s+=$1} END {print s/NR}')
val=$(grep '"val_loss"' "$dir/fall.json" | tail -1 | sed 's/.*"val_loss": \([0-9.]*\).*/\1/')
echo "loss: first $first, mean of last 10 $last, val $val"
awk -v f="$first" -v l="$last" 'BEGIN {exit !(l < f - 1.5)}' || fail "loss did not fall by 1.5 nats ($first -> $last)"
awk -v v="$val" 'BEGIN {exit !(v > 0 && v < 4.0)}' || fail "val loss $val not below 4.0"

# 1b. bf16 mixed precision trains too
train --steps 60 --precision bf16 >"$dir/bf16.json" || fail "sz-train --precision bf16 exited non-zero"
lastb=$(grep '"loss"' "$dir/bf16.json" | tail -10 | sed 's/.*"loss": \([0-9.]*\).*/\1/' | awk '{s+=$1} END {print s/NR}')
echo "bf16 loss: mean of last 10 $lastb (fp32 $last)"
awk -v l="$lastb" -v f="$last" 'BEGIN {d = l - f; if (d < 0) d = -d; exit !(d < 0.15)}' || fail "bf16 loss $lastb far from fp32 $last"

# 2. deterministic across runs and STARPU_NCPU
STARPU_NCPU=1 train --steps 6 --save "$dir/a.bin" | grep -o '"loss": [0-9.]*' >"$dir/a.txt" || fail "run a"
STARPU_NCPU=1 train --steps 6 --save "$dir/b.bin" | grep -o '"loss": [0-9.]*' >"$dir/b.txt" || fail "run b"
STARPU_NCPU=2 train --steps 6 --save "$dir/c.bin" | grep -o '"loss": [0-9.]*' >"$dir/c.txt" || fail "run c"
cmp -s "$dir/a.bin" "$dir/b.bin" || fail "two identical runs saved different parameters"
cmp -s "$dir/a.bin" "$dir/c.bin" || fail "STARPU_NCPU=1 and 2 saved different parameters"
cmp -s "$dir/a.txt" "$dir/c.txt" || fail "STARPU_NCPU=1 and 2 printed different losses"
echo "deterministic: same parameters (bitwise) and losses with STARPU_NCPU=1, 1, 2"

# 3. bad files: each must fail with a message naming the file
expect_error() { # FILE-NAMED-IN-MESSAGE WORD ARGS...
    local name=$1 word=$2; shift 2
    if "$bin/sz-train" "$@" >"$dir/out.txt" 2>&1; then fail "accepted bad input: $*"; fi
    grep -q -- "$name" "$dir/out.txt" && grep -qi -- "$word" "$dir/out.txt" \
        || { cat "$dir/out.txt"; fail "message lacks '$name' / '$word'"; }
    echo "refused as expected: $(head -1 "$dir/out.txt")"
}
expect_error a.bin magic --config d2 --vocab 256 --train "$dir/a.bin"
head -c 2000 "$dir/lic_train.bin" >"$dir/trunc.bin"
expect_error trunc.bin truncated --config d2 --vocab 256 --train "$dir/trunc.bin"
head -c 5000 "$dir/a.bin" >"$dir/trunc_model.bin"
expect_error trunc_model.bin truncated --init "$dir/trunc_model.bin" --train "$dir/lic_train.bin"
expect_error lic_train.bin "range" --config d2 --vocab 100 --train "$dir/lic_train.bin"
# bounds with clear messages: a deadline that would overflow the clocks, bytes beyond any machine
expect_error "1e+10 s" "outside 0 (none)" --config d2 --vocab 256 --timeout 1e10 --train "$dir/lic_train.bin"
expect_error "1e30" "more bytes than any machine" --config d2 --vocab 256 --mem-budget 1e30 --train "$dir/lic_train.bin"
# an unknown last option is named as unknown; a known one without its value as needing one
expect_error "--bogus" "unknown option" --config d2 --vocab 256 --train "$dir/lic_train.bin" --bogus
expect_error "--lr" "needs a value" --config d2 --vocab 256 --train "$dir/lic_train.bin" --lr
# inputs that are not regular files are refused, not opened (a FIFO would block); an empty output name
# is refused at start, not after training; the JSON state line stays valid JSON whatever the path
mkfifo "$dir/fifo.bin"
expect_error fifo.bin "not a regular file" --config d2 --vocab 256 --train "$dir/fifo.bin"
expect_error "''" "empty file name" --config d2 --vocab 256 --train "$dir/lic_train.bin" --save ""
mkdir -p "$dir/q\"d"
"$bin/sz-train" --config d2 --vocab 256 --max-seq 64 --seq 32 --batch 2 --steps 1 --json --train "$dir/lic_train.bin" \
    --save-state "$dir/q\"d/st" >"$dir/q.json" 2>/dev/null || fail "a run saving into a directory named with a quote"
grep '"state"' "$dir/q.json" | jawk '{ if (!jok($0)) { print "invalid JSON: " $0; exit 1 } }' ||
    fail "the JSON state line is not valid JSON for a path with a quote"
echo "a path with a quote: $(grep '"state"' "$dir/q.json")"
# a HOME StarPU cannot write its calibration into (sysfs) is no abort: a cache directory instead
if [ -d /sys/kernel ]; then
    env -u STARPU_HOME HOME=/sys/kernel XDG_CACHE_HOME="$dir/cache" "$bin/sz-train" --config d2 --vocab 256 \
        --max-seq 64 --seq 32 --batch 2 --steps 1 --train "$dir/lic_train.bin" >"$dir/home.txt" 2>&1 ||
        { cat "$dir/home.txt"; fail "an unwritable HOME stopped the run"; }
    grep -q "using STARPU_HOME=$dir/cache/starzero" "$dir/home.txt" && [ -d "$dir/cache/starzero/.starpu/sampling" ] ||
        { cat "$dir/home.txt"; fail "an unwritable HOME: no warning naming the cache directory used"; }
    echo "unwritable HOME: $(grep -m1 -o 'using STARPU_HOME=[^ ]*' "$dir/home.txt")"
fi
echo "train_cli: all checks passed"
