#!/usr/bin/env bash
# tests/info_cli.sh — sz-info --codelets lists every codelet the engine registers with its
# implementations: the table and the JSON agree, every codelet has a CPU implementation, the
# built-in ops and the step's own tasks are there, and a bad option is refused.
# Usage: info_cli.sh BUILD_DIR
set -u
bin=$1
corpus=none
. "$(dirname "$0")/cli_common.sh"   # fail
table=$("$bin/sz-info" --codelets) || fail "sz-info --codelets exited non-zero"
json=$("$bin/sz-info" --codelets --json) || fail "sz-info --codelets --json exited non-zero"
for cl in matmul_fwd matmul_bwd matmul_gelu_fwd gelu_matmul_bwd softmax_xent_bwd rmsnorm_fwd swiglu_fwd swiglu_bwd reduce_scatter all_gather adamw convert scale; do
    echo "$table" | grep -q "^$cl " || fail "codelet $cl missing from the table"
    echo "$json" | grep -q "\"name\": \"$cl\", \"implementations\": \[\"cpu\"" || fail "codelet $cl missing from the JSON or without cpu"
done
n_table=$(echo "$table" | tail -1 | awk '{print $1}')
n_json=$(echo "$json" | grep -c '"name":')
[ "$n_table" = "$n_json" ] || fail "table lists $n_table codelets, JSON $n_json"
[ "$(echo "$json" | grep -c '"cpu": 1')" = "$n_json" ] || fail "a codelet without a CPU implementation"
# the whole document parses as JSON (scripts/json.awk through jawk; no Python) with a non-empty list
echo "$json" | tr '\n' ' ' | jawk '{ ok = jok($0) && jraw($0, "codelets") ~ /^\[[ \t]*[^] \t]/ } END { exit !ok }' ||
    fail "the JSON does not parse"
"$bin/sz-info" --codelets --bogus >/dev/null 2>&1 && fail "an unknown option was accepted"
"$bin/sz-info" --json >/dev/null 2>&1 && fail "--json without --codelets was accepted"
echo "info_cli: $n_table codelets listed, table and JSON agree"
