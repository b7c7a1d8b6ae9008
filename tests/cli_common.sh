# tests/cli_common.sh — the prelude the CLI tests share; sourced (`. "$(dirname "$0")/cli_common.sh"`)
# after `bin` (the build directory) is set. Gives $dir, a scratch directory removed on exit; fail MSG
# (prints FAIL: MSG, exit 1); and the text corpus (licenses under /usr/share/common-licenses)
# prepared by sz-prepare as $dir/lic_train.bin and $dir/lic_val.bin, or exit 77 (skipped) without it.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
texts=$(ls /usr/share/common-licenses/{GPL-3,Apache-2.0} 2>/dev/null)
[ -n "$texts" ] || { echo "skipped: no text corpus in /usr/share/common-licenses"; exit 77; }
"$bin/sz-prepare" --out-dir "$dir" --prefix lic $texts >/dev/null || fail "sz-prepare"
