#!/bin/sh
# tests/docs_paths.sh SOURCE_DIR — every repository path that README.md and docs/*.md write in
# backticks exists in the tree. A path is a word of an inline code span that starts with one of the
# top-level folders (include/ graph/ tasks/ sched/ codelets/ core/ train/ apps/ tests/ scripts/ deps/
# cmake/ docs/ .ci/); trailing punctuation and a `:line` suffix are stripped; placeholders and
# patterns (`codelets/<op>.c`, `scripts/*.sh`, braces, `$VAR`, `...`) are skipped, and so are fenced
# code blocks (their commands name build outputs). Prints each missing path with the file that
# names it and exits 1; exits 0 when all exist. POSIX sh and awk only.
set -u
src=${1:?usage: docs_paths.sh SOURCE_DIR}
cd "$src" || { echo "docs_paths: cannot enter $src" >&2; exit 2; }

list=$(
    for f in README.md docs/*.md; do
        [ -f "$f" ] || continue
        awk -v file="$f" -v q="'" '
        function clean(p) {
            gsub("^[(`\"" q "\\[]+", "", p)                 # leading ( [ ` " and quote
            if (p !~ /^(include|graph|tasks|sched|codelets|core|train|apps|tests|scripts|deps|cmake|docs|\.ci)\//) return ""
            if (p ~ /[<>*{}$?|]/ || index(p, "[") || index(p, "]") || index(p, "...") || index(p, "…")) return ""
            sub(/:[0-9].*$/, "", p)                          # file.c:123, file.c:12-40
            while (p ~ ("[.,;:)`\"" q "]$")) p = substr(p, 1, length(p) - 1)
            return p
        }
        function emit(s,   n, w, k, p) {
            n = split(s, w, /[ \t]+/)
            for (k = 1; k <= n; k++) if ((p = clean(w[k])) != "") print file "\t" p
        }
        /^[ \t]*(```|~~~)/ { fence = !fence; inspan = 0; next }
        fence { next }
        /^[ \t]*$/ { inspan = 0; next }                      # a code span ends with its paragraph
        {
            line = $0; n = length(line)
            for (i = 1; i <= n; i++) {
                c = substr(line, i, 1)
                if (c != "`") { if (inspan) span = span c; continue }
                j = i; while (j <= n && substr(line, j, 1) == "`") j++
                run = j - i
                if (!inspan) { inspan = 1; open = run; span = "" }
                else if (run == open) { emit(span); inspan = 0 }
                else span = span substr(line, i, run)
                i = j - 1
            }
            if (inspan) span = span " "
        }' "$f"
    done | sort -u
)

missing=0
tab=$(printf '\t')
while IFS="$tab" read -r file path; do
    [ -n "$path" ] || continue
    if [ ! -e "$path" ]; then
        echo "docs_paths: $file names $path, which does not exist"
        missing=$((missing + 1))
    fi
done <<EOF
$list
EOF

if [ "$missing" -gt 0 ]; then
    echo "docs_paths: $missing missing path(s)"
    exit 1
fi
echo "docs_paths: every path named in README.md and docs/*.md exists ($(printf '%s\n' "$list" | grep -c .) checked)"
exit 0
