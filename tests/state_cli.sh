#!/usr/bin/env bash
# tests/state_cli.sh — training-state directories that belong to one run, and files that prove
# they are whole (issue 36, items 1 and 2), end to end with sz-train and sz-state on tiny models:
#  1. a run id in every manifest and in DIR/owner.json; a new run refuses a directory holding
#     another run's states (nothing touched) unless --overwrite-state, which removes them after its
#     first save (--keep 1 keeps the step just written); a resume keeps its run id and lineage, and
#     --keep counts that lineage's saves across restarts; rolling back (--resume DIR/step-3) starts
#     a new lineage that --keep respects, leaving the abandoned saves, and `--resume DIR` then
#     continues the new one; a second writer is refused while the first (2 ranks, paused in a save)
#     holds the lock, naming its pid and host, and the first one's .tmp-step-* survives;
#     `latest` naming a missing step and a .tmp-step-* directory are refused;
#  2. a checkpoint file whose header is the unfinished marker (what a writer killed during --save
#     leaves; the kill itself: test_llmc_format) is refused by --init; a manifest changed after it
#     was written is refused by its own checksum; changed layouts (units[i].shard, params[j].offset,
#     a negative offset, a small padded, the step, data.next_micro_batch, a tensor's name), resealed
#     with sz-state --reseal, are refused naming the field, never a crash; a version-1 manifest still
#     resumes, with a note; sz-state and --resume refuse a non-finite state naming the state, the
#     tensor and the element; --save, sz-state --export and --save-state refuse a FIFO (or a FIFO at
#     DIR/latest) at start, leaving it a FIFO;
#  3. --resume on a --train file whose contents differ from the state's (a hash in the manifest) is
#     refused, unless --allow-other-data.
# Usage: state_cli.sh BUILD_DIR MPIEXEC
set -u
bin=$1 mpiexec=$2
. "$(dirname "$0")/cli_common.sh"   # $dir, fail, the corpus $dir/lic_train.bin (or skipped)
tr=$dir/lic_train.bin
small=(--config 2,2,32 --vocab 256 --max-seq 32 --train "$tr" --seq 16 --batch 1 --lr 1e-3)
sztrain() { timeout 120 "$bin/sz-train" "$@"; }
szstate() { timeout 60 "$bin/sz-state" "$@"; }

expect() { # RC WORDS... -- ARGS...   sz-train exits with RC and its output holds every WORD
    local want=$1; shift
    local words=()
    while [ "$1" != "--" ]; do words+=("$1"); shift; done
    shift
    sztrain "$@" >"$dir/out.txt" 2>&1
    local rc=$?
    [ "$rc" = "$want" ] || { cat "$dir/out.txt"; fail "exit $rc, not $want: $*"; }
    for w in "${words[@]}"; do
        grep -qF -- "$w" "$dir/out.txt" || { cat "$dir/out.txt"; fail "message lacks '$w': $*"; }
    done
    echo "ok ($rc): $(grep -m1 'sz-train:' "$dir/out.txt" || head -1 "$dir/out.txt")"
}
expect_state() { # RC WORDS... -- ARGS...   the same for sz-state
    local want=$1; shift
    local words=()
    while [ "$1" != "--" ]; do words+=("$1"); shift; done
    shift
    szstate "$@" >"$dir/out.txt" 2>&1
    local rc=$?
    [ "$rc" = "$want" ] || { cat "$dir/out.txt"; fail "sz-state exit $rc, not $want: $*"; }
    for w in "${words[@]}"; do
        grep -qF -- "$w" "$dir/out.txt" || { cat "$dir/out.txt"; fail "sz-state message lacks '$w': $*"; }
    done
    echo "ok ($rc): $(grep -m1 'sz-state:' "$dir/out.txt" || tail -1 "$dir/out.txt")"
}
str() { grep -o "\"$1\":[[:space:]]*\"[^\"]*\"" "$2" | head -1 | sed 's/.*"\([^"]*\)"$/\1/'; } # KEY FILE
steps() { ls "$1" | grep '^step-' | tr '\n' ' '; }
no_steps_trained() { ! grep -q "^step " "$dir/out.txt" || fail "a refused run trained first"; }

# ---- 1. a state directory belongs to one run ----------------------------------------------------
sztrain "${small[@]}" --steps 10 --save-every 5 --save-state "$dir/a.st" >/dev/null 2>&1 || fail "run A"
ida=$(str run_id "$dir/a.st/step-00000010/manifest.json")
[ -n "$ida" ] && [ "$ida" = "$(str run_id "$dir/a.st/step-00000005/manifest.json")" ] &&
    [ "$ida" = "$(str run_id "$dir/a.st/owner.json")" ] || fail "run A: no run id, or not the same in its manifests and owner.json"
grep -q '"manifest_crc32"' "$dir/a.st/step-00000010/manifest.json" || fail "the manifest carries no checksum of its own"
echo "ok: run id $ida in both manifests and in owner.json"
# a new run into A's directory: refused, nothing touched (the issue's --keep 1 case)
expect 1 "holds 2 saved state(s) of another run (run $ida" "step-00000005 .. step-00000010" "--overwrite-state" -- \
    "${small[@]}" --steps 2 --keep 1 --save-state "$dir/a.st"
no_steps_trained
[ "$(steps "$dir/a.st")" = "step-00000005 step-00000010 " ] && [ "$(cat "$dir/a.st/latest")" = step-00000010 ] \
    || fail "a refused run changed the directory: $(steps "$dir/a.st"), latest $(cat "$dir/a.st/latest")"
# --overwrite-state: A's states go after this run's first save; --keep 1 keeps the step just written
expect 0 "--overwrite-state" "removed after this run's first save" -- "${small[@]}" --steps 2 --keep 1 \
    --overwrite-state --save-state "$dir/a.st"
[ "$(steps "$dir/a.st")" = "step-00000002 " ] && [ "$(cat "$dir/a.st/latest")" = step-00000002 ] \
    || fail "--overwrite-state --keep 1: $(steps "$dir/a.st"), latest $(cat "$dir/a.st/latest")"
idc=$(str run_id "$dir/a.st/step-00000002/manifest.json")
[ "$idc" != "$ida" ] && [ "$idc" = "$(str run_id "$dir/a.st/owner.json")" ] || fail "the new run's id is not in its manifest and owner.json"
echo "ok: --overwrite-state --keep 1: only the new step 2 (run $idc) left, latest names it"
# resuming keeps the run id and the lineage; --keep 2 counts the lineage's saves across the restart
lin=$(str lineage "$dir/a.st/step-00000002/manifest.json")
expect 0 "resuming from $dir/a.st/step-00000002" -- "${small[@]}" --steps 4 --save-every 1 --keep 2 \
    --resume "$dir/a.st" --save-state "$dir/a.st"
[ "$(steps "$dir/a.st")" = "step-00000003 step-00000004 " ] || fail "resume --keep 2: $(steps "$dir/a.st")"
[ "$(str run_id "$dir/a.st/step-00000004/manifest.json")" = "$idc" ] && [ "$(str lineage "$dir/a.st/step-00000004/manifest.json")" = "$lin" ] \
    || fail "a resume changed the run id or the lineage"
echo "ok: a resume kept run $idc and its lineage; --keep 2 kept steps 3-4"

# rolling back: a new lineage, which --keep counts alone
sztrain "${small[@]}" --steps 5 --save-every 1 --save-state "$dir/r.st" >/dev/null 2>&1 || fail "run R"
expect 0 "resuming step-00000003, older than the newest save of its lineage (step-00000004, step-00000005)" \
    "starts a new lineage" "replaces the abandoned lineage's save of the same step" -- "${small[@]}" --steps 4 \
    --save-every 1 --keep 1 --lr 5e-4 --resume "$dir/r.st/step-00000003" --save-state "$dir/r.st"
[ "$(steps "$dir/r.st")" = "step-00000001 step-00000002 step-00000003 step-00000004 step-00000005 " ] &&
    [ "$(cat "$dir/r.st/latest")" = step-00000004 ] || fail "rollback --keep 1: $(steps "$dir/r.st"), latest $(cat "$dir/r.st/latest")"
[ "$(str lineage "$dir/r.st/step-00000004/manifest.json")" != "$(str lineage "$dir/r.st/step-00000005/manifest.json")" ] \
    || fail "the rolled-back step 4 is in the abandoned lineage"
expect 0 "resuming from $dir/r.st/step-00000004" -- "${small[@]}" --steps 6 --save-every 1 --keep 1 \
    --resume "$dir/r.st" --save-state "$dir/r.st"
[ "$(steps "$dir/r.st")" = "step-00000001 step-00000002 step-00000003 step-00000006 " ] && [ "$(cat "$dir/r.st/latest")" = step-00000006 ] \
    || fail "the new lineage's --keep 1: $(steps "$dir/r.st"), latest $(cat "$dir/r.st/latest")"
echo "ok: rollback to step 3: the new step 4 kept (not the abandoned step 5), --resume DIR continued it; --keep 1 left step 6 and the old lineage's 1-3"

# latest only names a complete step; a temporary directory is not a state
mkdir "$dir/r.st/.tmp-step-00000009" && cp "$dir/r.st/step-00000006/manifest.json" "$dir/r.st/.tmp-step-00000009/"
expect 1 "the temporary directory of an unfinished save" -- "${small[@]}" --steps 9 --resume "$dir/r.st/.tmp-step-00000009"
rm -rf "$dir/r.st/step-00000006"
expect 1 "latest names 'step-00000006', which is not a complete state" -- "${small[@]}" --steps 9 --resume "$dir/r.st"
expect_state 1 "latest names 'step-00000006'" -- "$dir/r.st"

# the lock: a second writer is refused while the first holds it, naming its pid and host
SZ_TEST_SAVE_DELAY_MS=30000 timeout 120 "$mpiexec" -n 2 "$bin/sz-train" "${small[@]}" --zero-stage 3 --steps 2 \
    --save-state "$dir/l.st" >"$dir/l.out" 2>&1 &
lpid=$!
for _ in $(seq 600); do grep -q "pausing" "$dir/l.out" && break; sleep 0.1; done
grep -q "pausing" "$dir/l.out" || { cat "$dir/l.out"; fail "the first writer never reached its save"; }
holder=$(sed -n 's/.*pausing .* (pid \([0-9]*\)).*/\1/p' "$dir/l.out")
expect 1 "$dir/l.st is in use by another run: pid $holder on host $(hostname)" "holds its lock" -- \
    "${small[@]}" --steps 1 --overwrite-state --save-state "$dir/l.st"
no_steps_trained
[ -d "$dir/l.st/.tmp-step-00000002" ] || fail "the refused run deleted the first one's .tmp-step-00000002"
kill -TERM "$holder" # ends the pause; the save completes (it is the last step)
wait $lpid || { cat "$dir/l.out"; fail "the first writer failed after the second was refused"; }
[ "$(cat "$dir/l.st/latest")" = step-00000002 ] && szstate --quiet "$dir/l.st" >/dev/null || fail "the first writer's save is not complete"
expect 0 "resuming from $dir/l.st/step-00000002" -- "${small[@]}" --steps 3 --resume "$dir/l.st" --save-state "$dir/l.st"
echo "ok: the second writer was refused naming pid $holder on $(hostname); the first one's save completed"

# ---- 2. files that prove they are whole ----------------------------------------------------------
# a checkpoint file as a writer killed before its header leaves it (the unfinished marker -20240326)
sztrain "${small[@]}" --steps 1 --save "$dir/m.bin" >/dev/null 2>&1 || fail "--save"
cp "$dir/m.bin" "$dir/m.bin.tmp"
printf '\x3a\x28\xcb\xfe' | dd of="$dir/m.bin.tmp" bs=1 conv=notrunc 2>/dev/null
expect 1 "m.bin.tmp: an unfinished file" "header is written last" -- --init "$dir/m.bin.tmp" --train "$tr" --seq 16 --steps 1

# the manifest's own checksum, then its layout (edits resealed with sz-state --reseal)
mpi2() { timeout 120 "$mpiexec" -n 2 "$bin/sz-train" "$@"; }
mpi2 "${small[@]}" --zero-stage 3 --steps 2 --save-state "$dir/s.st" >/dev/null 2>&1 || fail "2-rank state"
sd=$dir/s.st/step-00000002 man=$dir/s.st/step-00000002/manifest.json
cp "$man" "$dir/man.orig"
nth() { # N KEY VALUE: the Nth "KEY": number in the manifest set to VALUE (1-based), then resealed
    awk -v n="$1" -v k="\"$2\":" -v v="$3" '{ if (index($0, k) && ++c == n) sub(/-?[0-9][0-9.e+-]*/, v, $0); print }' \
        "$dir/man.orig" >"$man"
    szstate --reseal "$sd" >/dev/null || fail "sz-state --reseal"
}
resume=("${small[@]}" --steps 3 --resume "$dir/s.st")
sed 's/"step":\t2/"step":\t3/' "$dir/man.orig" >"$man"
expect 1 "manifest.json: checksum crc32" "changed after it was written" -- "${resume[@]}"
expect_state 1 "checksum crc32" -- "$dir/s.st"
shard2=$(grep '"shard":' "$dir/man.orig" | sed -n 2p | tr -dc 0-9)
nth 2 shard $((shard2 + 1))
expect 1 "units[1].shard is $((shard2 + 1)), but padded" "/ N_d 2 is $shard2" -- "${resume[@]}"
expect_state 1 "units[1].shard is $((shard2 + 1))" -- "$dir/s.st" --export "$dir/x.bin"
off=$(grep '"offset":' "$dir/man.orig" | sed -n 4p | tr -dc 0-9)   # the 2nd tensor of the 2nd unit
nth 4 offset $((off + 4))
expect 1 "params[1].offset is $((off + 4)), but the tensors before it end at $off" -- "${resume[@]}"
nth 4 offset -4
expect 1 "params[1].offset is -4, not an integer" -- "${resume[@]}"
expect_state 1 "params[1].offset is -4" -- "$dir/s.st" --export "$dir/x.bin"
nth 2 padded 2
expect_state 1 "units[1].padded is 2, but its" -- "$dir/s.st" --export "$dir/x.bin"
[ ! -e "$dir/x.bin" ] || fail "sz-state exported from a refused manifest"
nth 1 step 3
expect 1 "step is 3, but its directory is step-00000002" -- "${resume[@]}"
nth 1 next_micro_batch -5
expect 1 "data.next_micro_batch is -5" -- "${resume[@]}"
sed 's/"name":\t"qkvw"/"name":\t"qkvx"/' "$dir/man.orig" >"$man" && szstate --reseal "$sd" >/dev/null
expect 1 "is 'qkvx' at offset" "'qkvw' at" "in the model" -- "${resume[@]}"
# a manifest from before run ids and checksums (version 1): resumes, with a note
sed -e 's/"version":\t2/"version":\t1/' -e '/"run_id":/d' -e '/"lineage":/d' -e '/"save_seq":/d' \
    -e 's/"manifest_crc32":.*/"old": 0/' "$dir/man.orig" >"$man"
expect 0 "written by an older StarZeRO (manifest version 1" "resuming from $sd" -- "${small[@]}" --zero-stage 3 --steps 3 \
    --resume "$dir/s.st"
cp "$dir/man.orig" "$man"
szstate --quiet "$dir/s.st" >/dev/null || fail "the restored manifest does not verify"

# non-finite states: named by state, tensor and element, by sz-state and by --resume
sztrain "${small[@]}" --steps 1 --save-state "$dir/f.st" >/dev/null 2>&1 || fail "state for inf"
fd=$dir/f.st/step-00000001
printf '\x00\x00\x80\x7f' | dd of="$fd/adam_v-r00000.bin" bs=1 seek=$((4 * 7)) conv=notrunc 2>/dev/null   # +inf, element 7
crc=$(gzip -c "$fd/adam_v-r00000.bin" | tail -c 8 | head -c 4 | od -An -tu4 | tr -d ' ')   # the file's crc32 again
awk -v c="$crc" '/"name":\t"adam_v-r00000.bin"/ { f = 1 } f && /"crc32":/ { sub(/:[[:space:]]*[0-9]+/, ":\t" c); f = 0 } { print }' \
    "$fd/manifest.json" >"$dir/m.json" && cp "$dir/m.json" "$fd/manifest.json" && szstate --reseal "$fd" >/dev/null
t0=$(grep -m1 -A4 '"params":' "$fd/manifest.json" | str name /dev/stdin)
u0=$(grep -m1 -A2 '"units":' "$fd/manifest.json" | str name /dev/stdin)
expect_state 1 "adam_v of tensor $t0 of unit $u0, element 7 holds inf" "non-finite values is refused" -- "$fd"
expect 1 "adam_v of tensor $t0 of unit $u0, element 7 holds inf" -- "${small[@]}" --steps 2 --resume "$dir/f.st"
sztrain "${small[@]}" --steps 2 --lr 1e30 --allow-nonfinite --save-state "$dir/nan.st" >/dev/null 2>&1 || fail "diverging run"
expect_state 1 "params of tensor" "holds NaN" -- "$dir/nan.st"
expect 1 "params of tensor" "holds NaN" "non-finite values is refused" -- "${small[@]}" --steps 3 --resume "$dir/nan.st"

# outputs: only a regular file is ever replaced (a FIFO is refused at start and stays a FIFO)
mkfifo "$dir/fifo"
expect 1 "--save $dir/fifo: cannot be written: it is a FIFO, and only a regular file is ever replaced" -- \
    "${small[@]}" --steps 1 --save "$dir/fifo"
no_steps_trained
expect_state 1 "--export $dir/fifo: cannot be written: it is a FIFO" -- "$dir/a.st" --export "$dir/fifo"
expect 1 "--save-state $dir/fifo: not a directory" -- "${small[@]}" --steps 1 --save-state "$dir/fifo"
mkdir "$dir/fl.st" && mkfifo "$dir/fl.st/latest"
expect 1 "$dir/fl.st/latest: it is a FIFO, and only a regular file is ever replaced" -- "${small[@]}" --steps 1 \
    --save-state "$dir/fl.st"
no_steps_trained
[ -p "$dir/fifo" ] && [ -p "$dir/fl.st/latest" ] || fail "a FIFO was replaced"
# --resume on another --train file (the same size, one token changed): refused naming the files and
# their contents hashes, unless --allow-other-data (then a note, and it trains on)
cp "$tr" "$dir/other.bin"
printf 'A' | dd of="$dir/other.bin" bs=1 seek=5000 conv=notrunc status=none
sztrain "${small[@]}" --steps 2 --save-state "$dir/d.st" >/dev/null 2>&1 || fail "run D"
other=("${small[@]/$tr/$dir/other.bin}")
expect 1 "the state was trained on $tr" "contents hash" "pass --allow-other-data" -- "${other[@]}" --steps 3 \
    --resume "$dir/d.st"
expect 0 "note: --allow-other-data: the state was trained on $tr" -- "${other[@]}" --steps 3 --resume "$dir/d.st" \
    --allow-other-data
echo "state_cli: all checks passed"
