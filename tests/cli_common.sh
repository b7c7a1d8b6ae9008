# tests/cli_common.sh — the prelude the CLI tests share; sourced (`. "$(dirname "$0")/cli_common.sh"`)
# after `bin` (the build directory) is set. Gives $dir, a scratch directory removed on exit; fail MSG
# (prints FAIL: MSG, exit 1); field KEY (the numbers of "KEY": N in the JSON lines on stdin); close A
# B RELTOL (|A - B| <= RELTOL (|A| + 1e-6)); jawk PROGRAM [FILE...] (awk with scripts/json.awk's JSON
# readers jok/jraw/jget/jisnum/jnumfmt loaded: the one JSON parser, no Python); and the text corpus (licenses under
# /usr/share/common-licenses) prepared by sz-prepare as $dir/lic_train.bin and $dir/lic_val.bin, or
# exit 77 (skipped) without it. Which licenses: $corpus if set before sourcing (names, e.g.
# "GPL-3 LGPL-3 Apache-2.0"; default "GPL-3 Apache-2.0"); corpus=none prepares nothing.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
field() { grep "\"$1\"" | sed "s/.*\"$1\": \([-0-9.e]*\).*/\1/"; }
sz_json_awk="$(cd "$(dirname "${BASH_SOURCE[0]}")/../scripts" && pwd)/json.awk"
jawk() { local prog=$1; shift; awk -f "$sz_json_awk" -f <(printf '%s\n' "$prog") "$@"; }
close() { # A B RELTOL
    awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a); exit !(d <= t * (m + 1e-6)) }'
}
if [ "${corpus:-}" != none ]; then
    # shellcheck disable=SC2046,SC2086
    texts=$(ls $(printf '/usr/share/common-licenses/%s ' ${corpus:-GPL-3 Apache-2.0}) 2>/dev/null)
    [ -n "$texts" ] || { echo "skipped: no text corpus in /usr/share/common-licenses"; exit 77; }
    # shellcheck disable=SC2086
    "$bin/sz-prepare" --out-dir "$dir" --prefix lic $texts >/dev/null || fail "sz-prepare"
fi
