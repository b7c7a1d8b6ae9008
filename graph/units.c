/* graph/units.c — numbers with multiplier suffixes as users type them on command lines:
 * parameter counts (124M, 7.5e9, 1.5B) and byte sizes (500M, 16G = powers of 1000; 16GiB = powers of
 * 1024; case matters, so "Gb" — gigabits — is refused). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "starzero.h"

/* A number with an optional multiplier suffix taken from `units` (the whole rest of the string;
 * matched case-insensitively when `nocase`). Returns 0 and sets *out on success. */
struct unit {
    const char *suffix;
    double mult;
};

static int parse_scaled(const char *s, const struct unit *units, int nocase, double *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno == ERANGE || !isfinite(v))
        return -1;
    double mult = 0.0;
    for (const struct unit *u = units; u->suffix; u++)
        if (nocase ? !strcasecmp(end, u->suffix) : !strcmp(end, u->suffix)) {
            mult = u->mult;
            break;
        }
    if (mult == 0.0 || !isfinite(v * mult))
        return -1;
    *out = v * mult;
    return 0;
}

static const struct unit k_count_units[] = {
    {"", 1.0}, {"K", 1e3}, {"M", 1e6}, {"B", 1e9}, {"G", 1e9}, {"T", 1e12}, {NULL, 0}};

/* Case-sensitive: "Gb" would read as gigabits. k and kB are the SI spellings of K and KB. */
static const struct unit k_byte_units[] = {
    {"", 1.0},           {"B", 1.0},           {"k", 1e3},            {"kB", 1e3},
    {"K", 1e3},          {"KB", 1e3},           {"M", 1e6},           {"MB", 1e6},
    {"G", 1e9},          {"GB", 1e9},           {"T", 1e12},          {"TB", 1e12},
    {"KiB", 1024.0},     {"MiB", 1048576.0},    {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
    {NULL, 0}};


sz_status sz_parse_count(const char *s, double *out)
{
    return parse_scaled(s, k_count_units, 1, out) == 0 ? SZ_OK : SZ_ERR_INVALID;
}

sz_status sz_parse_bytes(const char *s, double *out)
{
    return parse_scaled(s, k_byte_units, 0, out) == 0 ? SZ_OK : SZ_ERR_INVALID;
}
