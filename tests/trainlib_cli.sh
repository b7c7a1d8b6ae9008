#!/usr/bin/env bash
# tests/trainlib_cli.sh — the training loop as a library (include/starzero_train.h), through the
# example app built on it (apps/examples/custom_model.c, built in the tree as custom_model):
#  1. with no arguments it trains 60 steps on data it makes, learns (final loss < 0.05), saves every
#     20 steps keeping 2 (latest = step 60, step 40 kept, step 20 pruned), and sz-state verifies it;
#     run again it resumes there and has nothing to train; at stage 0 without checkpointing its
#     losses are bitwise the same;
#  2. SIGTERM to the process during a 200-step run: it finishes the step, saves, says so, exits 0;
#     resumed, steps k+1..200 have bitwise the losses of an uninterrupted run;
#  3. 2 ranks at stage 3, SIGUSR1 to mpirun: every rank stops after the same step, the state is
#     saved (exit 0); resumed on 1 rank at stage 1 (re-sharded), it ends within float rounding of
#     the uninterrupted 1-rank run (the same global batch);
#  4. on a token file (sz-prepare's, of a license text) it trains too: the loss falls;
#  5. bad input: a shard damaged after the save is refused naming the file (exit 1, nothing
#     trained); a state directory locked by a live run is refused naming its pid; --tokens with a
#     file that is not a token file is refused naming it; a global batch that does not split over
#     the ranks is refused;
#  6. the tools spell shared options alike: sz-estimate gives the same output for sz-train's
#     --config/--zero-stage/--mem-budget/--checkpoint/--grad-clip X as for its own --model/--stage/
#     --budget/--ckpt/--clip (and --grad-clip 0 is not --clip); sz-bench takes --config/--stage/--ckpt
#     (the model, stage and checkpointing reach its report), sz-train --model/--stage/--ckpt/--budget
#     (the stage reaches the run); `sz-train --help` says what a signal to mpirun does.
# Usage: trainlib_cli.sh BUILD_DIR MPIEXEC
set -u
bin=$1 mpiexec=$2
corpus=GPL-3
. "$(dirname "$0")/cli_common.sh"   # $dir, fail, close; $dir/lic_train.bin
ex=$bin/custom_model
mpi() { timeout 120 "$mpiexec" -n "$@"; }
losses() { grep -o '^step [0-9]*/[0-9]*: loss [-0-9.e]*' "$1" | sed 's|/[0-9]*||'; }
child() { pgrep -P "$1" | head -1; }
wait_for() { # FILE PATTERN: wait (at most 60 s) until FILE holds PATTERN
    for _ in $(seq 600); do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    cat "$1"; fail "timed out waiting for '$2'"
}
cd "$dir" || exit 1

# 1. no arguments
timeout 120 "$ex" >"$dir/a.out" 2>&1 || { tail -5 "$dir/a.out"; fail "custom_model (no arguments) exited $?"; }
tail -1 "$dir/a.out" | awk '/^final loss/ { exit !($3 < 0.05) } { exit 1 }' || fail "did not learn: $(tail -1 "$dir/a.out")"
[ "$(cat custom_model.state/latest)" = step-00000060 ] || fail "latest is not step-00000060"
[ -d custom_model.state/step-00000040 ] && [ ! -e custom_model.state/step-00000020 ] \
    || fail "--keep 2: expected step-00000040 and step-00000060 only: $(ls custom_model.state)"
"$bin/sz-state" --quiet custom_model.state >/dev/null || fail "sz-state does not verify the example's state"
timeout 120 "$ex" >"$dir/a2.out" 2>&1 || fail "custom_model run again exited $?"
grep -q "^resuming from custom_model.state/step-00000060: step 60" "$dir/a2.out" && grep -q "nothing to train" "$dir/a2.out" \
    || { cat "$dir/a2.out"; fail "run again: did not resume at step 60 with nothing to train"; }
echo "ok: no arguments: $(tail -1 "$dir/a.out"); saves 40 and 60 kept, sz-state verifies; run again resumes at 60"
# ZeRO changes where state lives, not the math: stage 0 without checkpointing, the same bits
timeout 120 "$ex" --state s0 --stage 0 --no-checkpoint >"$dir/s0.out" 2>&1 || fail "--stage 0 --no-checkpoint"
cmp -s <(losses "$dir/a.out") <(losses "$dir/s0.out") || fail "stage 0 without checkpointing differs from stage 3 with it"
echo "ok: stage 0 without checkpointing: bitwise the losses of stage 3 with it"

# 2. SIGTERM, then resume: bitwise the uninterrupted run
timeout 120 "$ex" --state full --steps 200 >"$dir/full.out" 2>&1 || fail "200 steps straight"
timeout 120 "$ex" --state sig --steps 200 >"$dir/sig.out" 2>&1 &
pid=$!
wait_for "$dir/sig.out" "^step 20/"
kill -TERM "$(child $pid)"
wait $pid
rc=$?
[ "$rc" = 0 ] || { tail -3 "$dir/sig.out"; fail "SIGTERM: exit $rc, not 0"; }
line=$(grep "custom_model: stopped by signal 15 after step" "$dir/sig.out") || { tail -3 "$dir/sig.out"; fail "SIGTERM: no stop line"; }
k=$(echo "$line" | sed 's/.*after step \([0-9]*\).*/\1/')
[ "$k" -lt 200 ] || fail "SIGTERM: the run went to the end (step $k)"
[ "$(cat sig/latest)" = "$(printf 'step-%08d' "$k")" ] || fail "SIGTERM: latest is $(cat sig/latest), not step $k"
timeout 120 "$ex" --state sig --steps 200 >"$dir/sig.res.out" 2>&1 || fail "resume after SIGTERM"
grep -q "^resuming from sig/$(printf 'step-%08d' "$k"): step $k" "$dir/sig.res.out" || fail "the resumed run did not start after step $k"
cmp -s <(losses "$dir/full.out" | tail -n $((200 - k))) <(losses "$dir/sig.res.out") \
    || { diff <(losses "$dir/full.out" | tail -n $((200 - k))) <(losses "$dir/sig.res.out") | head -4; fail "resumed losses differ from the uninterrupted run"; }
echo "ok: SIGTERM after step $k: saved, exit 0; resumed, steps $((k + 1))-200 bitwise the uninterrupted run's"

# 3. 2 ranks, SIGUSR1 to mpirun; resumed on 1 rank at stage 1
timeout 120 "$mpiexec" -n 2 "$ex" --state two --steps 200 --stage 3 >"$dir/two.out" 2>&1 &
pid=$!   # timeout's pid: its child is mpiexec
wait_for "$dir/two.out" "^step 20/"
kill -USR1 "$(child $pid)"
wait $pid
rc=$?
[ "$rc" = 0 ] || { tail -5 "$dir/two.out"; fail "2 ranks, SIGUSR1 to mpirun: exit $rc, not 0"; }
line=$(grep "custom_model: stopped by signal 10 after step" "$dir/two.out") || { tail -3 "$dir/two.out"; fail "2 ranks: no stop line"; }
k=$(echo "$line" | sed 's/.*after step \([0-9]*\).*/\1/')
"$bin/sz-state" --quiet two >/dev/null || fail "2 ranks: sz-state does not verify the state"
timeout 120 "$ex" --state two --steps 200 --stage 1 >"$dir/two.res.out" 2>&1 || { tail -3 "$dir/two.res.out"; fail "resume of 2 ranks' state on 1 rank, stage 1"; }
grep -q "^resuming from two/$(printf 'step-%08d' "$k"): step $k (saved at N_d 2)" "$dir/two.res.out" || fail "1 rank did not resume the 2 ranks' step $k"
a=$(losses "$dir/full.out" | tail -1 | awk '{ print $4 }') b=$(losses "$dir/two.res.out" | tail -1 | awk '{ print $4 }')
close "$a" "$b" 1e-3 || fail "2 ranks stopped at $k then 1 rank: final loss $b, the uninterrupted run's $a"
echo "ok: 2 ranks, SIGUSR1 to mpirun: all stopped after step $k, saved, exit 0; resumed on 1 rank at stage 1: loss $b (uninterrupted $a)"

# 4. a token file
timeout 120 "$ex" --state tokrun --tokens "$dir/lic_train.bin" --steps 30 >"$dir/tokrun.out" 2>&1 || { tail -3 "$dir/tokrun.out"; fail "--tokens lic_train.bin"; }
first=$(losses "$dir/tokrun.out" | head -1 | awk '{ print $4 }') last=$(losses "$dir/tokrun.out" | tail -1 | awk '{ print $4 }')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.8 * a) }' || fail "--tokens: the loss went from $first to $last"
echo "ok: on a token file: loss $first -> $last in 30 steps"

# 5. bad input
cp -r full damaged
f=$(ls damaged/step-00000200/params-r*.bin | head -1)
printf '\x7f' | dd of="$f" bs=1 seek=100 conv=notrunc status=none
timeout 120 "$ex" --state damaged --steps 210 >"$dir/dmg.out" 2>&1 && fail "a damaged shard was accepted"
grep -q "$(basename "$f")" "$dir/dmg.out" || { cat "$dir/dmg.out"; fail "the refusal does not name the damaged file"; }
! grep -q "^step 201/" "$dir/dmg.out" || fail "trained on a damaged state"
timeout 120 "$ex" --state lock --steps 100000 >"$dir/lock1.out" 2>&1 &
pid=$!
wait_for "$dir/lock1.out" "^step 2/"
timeout 120 "$ex" --state lock --fresh --steps 5 >"$dir/lock2.out" 2>&1 && fail "a second run wrote a locked directory"
grep -q "in use by another run: pid $(child $pid)" "$dir/lock2.out" || { cat "$dir/lock2.out"; fail "the lock refusal does not name the holder's pid"; }
kill -INT "$(child $pid)"
wait $pid || fail "SIGINT: exit $?"
printf 'not tokens' >"$dir/bad.bin"
timeout 120 "$ex" --state tok --tokens "$dir/bad.bin" >"$dir/tok.out" 2>&1 && fail "a file that is not a token file was accepted"
grep -q "bad.bin" "$dir/tok.out" || { cat "$dir/tok.out"; fail "the token file refusal does not name the file"; }
mpi 2 "$ex" --state odd --batch 255 >"$dir/odd.out" 2>&1 && fail "--batch 255 over 2 ranks was accepted"
grep -q "does not split over 2 ranks" "$dir/odd.out" || { cat "$dir/odd.out"; fail "no message for --batch 255 on 2 ranks"; }
echo "ok: refused: a damaged shard (named), a locked directory (holder's pid), a bad token file, a batch that does not split"

# 6. shared options spelled alike
e1=$("$bin/sz-estimate" --model d2 --vocab 256 --nd 1,2 --budget 1G --ckpt 2>&1)
e2=$("$bin/sz-estimate" --config d2 --vocab 256 --nd 1,2 --mem-budget 1G --checkpoint 2>&1)
[ "$e1" = "$e2" ] || fail "sz-estimate: --config/--mem-budget/--checkpoint differ from --model/--budget/--ckpt"
p1=$("$bin/sz-estimate" --model d2 --vocab 256 --plan --stage 2 --clip 2>&1)
p2=$("$bin/sz-estimate" --config d2 --vocab 256 --plan --zero-stage 2 --grad-clip 1.0 2>&1)
p3=$("$bin/sz-estimate" --config d2 --vocab 256 --plan --zero-stage 2 --grad-clip 0 2>&1)
p4=$("$bin/sz-estimate" --config d2 --vocab 256 --plan --zero-stage 1 --grad-clip 1.0 2>&1)
[ "$p1" = "$p2" ] || fail "sz-estimate --plan: --zero-stage 2 --grad-clip 1.0 differs from --stage 2 --clip"
[ "$p1" != "$p3" ] && [ "$p2" != "$p4" ] || fail "sz-estimate --plan: --grad-clip or --zero-stage had no effect"
"$bin/sz-estimate" --config d2 --zero-stage 5 2>&1 | grep -q "stage 5" || fail "sz-estimate --zero-stage 5 not refused"
b=$(timeout 120 "$bin/sz-bench" --config d2 --vocab 256 --batch 1 --seq 16 --steps 1 --warmup 0 --stage 1 --ckpt --json 2>&1 | tail -1)
echo "$b" | grep -q '"model":"d2"' && echo "$b" | grep -q '"zero_stage":1' && echo "$b" | grep -q '"checkpoint":1' \
    || fail "sz-bench --config d2 --stage 1 --ckpt: $b"
t=$(timeout 120 "$bin/sz-train" --model d2 --vocab 256 --max-seq 16 --train "$dir/lic_train.bin" --batch 1 --seq 16 \
    --steps 1 --stage 2 --ckpt --budget 4G 2>&1) || fail "sz-train --model --stage --ckpt --budget: $t"
echo "$t" | grep -q "ZeRO stage 2" || fail "sz-train --stage 2 did not reach the run: $(echo "$t" | head -2)"
h=$("$bin/sz-train" --help)
echo "$h" | grep -q "SIGUSR1/SIGUSR2 to Open MPI's" && echo "$h" | grep -q "SIGTERM/SIGINT to mpirun do NOT" \
    || fail "sz-train --help does not say what signals to mpirun do"
echo "ok: sz-estimate, sz-bench and sz-train take each other's spellings (--config/--model, --zero-stage/--stage, --mem-budget/--budget, --checkpoint/--ckpt, --grad-clip/--clip)"
echo PASS
