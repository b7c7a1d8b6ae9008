# scripts/json.awk — the one JSON reader of the shell scripts and tests (awk functions, no Python, no
# jq): load it before a program, `awk -f scripts/json.awk -f PROG` (scripts/common.sh's sz_jawk,
# tests/cli_common.sh's jawk run a program text that way). It reads one JSON object given as a
# string (a line of JSON lines, or a whole document joined into one line):
#   jok(s)        1 when s is one JSON object (strings, brackets and commas checked; a bare token is
#                 any run of letters, digits and "+-._", so true/false/null/numbers and also NaN)
#   jraw(s, k)    the JSON text of s's top-level key k, as written ("\"pass\"", "12.5", "[1, 2]",
#                 "{...}", "null"); "" when absent or s is not an object. JF = 1 when k is there.
#                 The last of duplicate keys wins (as in Python's json).
#   jget(s, k)    the same, a string without its quotes (escapes left as written), other values raw
#   jisnum(v)     1 when the JSON text v is a number (not a string, not a boolean, not null)
#   jnumfmt(v)    the number v as Python's json writes a float it read: trailing zeros of a decimal
#                 fraction dropped, one kept ("410.500" -> "410.5", "100.0" stays); others unchanged
#   jnkeys / JK[i], JV[i]   after jok(s): s's top-level keys and their JSON texts, in order
# A scan is cached: asking many keys of the same string parses it once.

function jws(s, i, n) { # the first index at or after i that is not white space
    while (i <= n && index(" \t\r\n", substr(s, i, 1))) i++
    return i
}
function jstr(s, i, n,   c) { # s[i] is a quote: the index after the closing quote, 0 if unterminated
    for (i++; i <= n; i++) {
        c = substr(s, i, 1)
        if (c == "\\") { i++; continue }
        if (c == "\"") return i + 1
    }
    return 0
}
function jval(s, i, n,   c) { # a value starts at i: the index after it, 0 when it is not JSON
    c = substr(s, i, 1)
    if (c == "\"") return jstr(s, i, n)
    if (c == "{" || c == "[") return jcomp(s, i, n)
    if (match(substr(s, i), /^[-+.A-Za-z0-9_]+/)) return i + RLENGTH
    return 0
}
function jcomp(s, i, n,   cl, obj, c) { # an object or array starts at i: the index after it, or 0
    obj = substr(s, i, 1) == "{"; cl = obj ? "}" : "]"
    i = jws(s, i + 1, n)
    if (substr(s, i, 1) == cl) return i + 1
    while (1) {
        if (obj) {
            if (substr(s, i, 1) != "\"" || !(i = jstr(s, i, n))) return 0
            i = jws(s, i, n)
            if (substr(s, i, 1) != ":") return 0
            i = jws(s, i + 1, n)
        }
        if (!(i = jval(s, i, n))) return 0
        i = jws(s, i, n); c = substr(s, i, 1)
        if (c == cl) return i + 1
        if (c != ",") return 0
        i = jws(s, i + 1, n)
    }
}
function jok(s,   n, i, j, c) { # parses s's top level into JK/JV (jnkeys of them); 1 when s is an object
    if (JS_SEEN && s == JS_LAST) return JS_OK
    JS_SEEN = 1; JS_LAST = s; JS_OK = 0; jnkeys = 0
    n = length(s); i = jws(s, 1, n)
    if (substr(s, i, 1) != "{") return 0
    i = jws(s, i + 1, n)
    if (substr(s, i, 1) == "}") return JS_OK = (jws(s, i + 1, n) > n)
    while (1) {
        if (substr(s, i, 1) != "\"" || !(j = jstr(s, i, n))) return 0
        JK[jnkeys + 1] = substr(s, i + 1, j - i - 2)
        i = jws(s, j, n)
        if (substr(s, i, 1) != ":") return 0
        i = jws(s, i + 1, n)
        if (!(j = jval(s, i, n))) return 0
        jnkeys++; JV[jnkeys] = substr(s, i, j - i)
        i = jws(s, j, n); c = substr(s, i, 1)
        if (c == "}") return JS_OK = (jws(s, i + 1, n) > n)
        if (c != ",") return 0
        i = jws(s, i + 1, n)
    }
}
function jraw(s, k,   i, v) {
    JF = 0; v = ""
    if (!jok(s)) return ""
    for (i = 1; i <= jnkeys; i++) if (JK[i] == k) { JF = 1; v = JV[i] }
    return v
}
function jget(s, k,   v) {
    v = jraw(s, k)
    return substr(v, 1, 1) == "\"" ? substr(v, 2, length(v) - 2) : v
}
function jisnum(v) { return v ~ /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$/ }
function jnumfmt(v) {
    if (v ~ /^-?[0-9]+\.[0-9]+$/) { sub(/0+$/, "", v); if (v ~ /\.$/) v = v "0" }
    return v
}
