/* apps/common/opts.h — strict command-line values for the apps: a number parses completely or
 * is refused ("2x", "2.9" for an integer, "abc", an empty string), and is checked against its
 * allowed range, the message naming the option, the value and the range. Also the checks that
 * the paths a run will write are writable, made before any work starts. */
#ifndef SZ_APP_OPTS_H
#define SZ_APP_OPTS_H

#include <stddef.h>

/* The program name the messages start with (default "sz"). */
void sz_opt_prog(const char *name);

/* 0 and *out set, or a message on stderr and -1. Integers: lo <= value <= hi. */
int sz_opt_int(const char *opt, const char *v, long lo, long hi, int *out);
int sz_opt_u64(const char *opt, const char *v, unsigned long long *out);
/* A finite real in the range [lo or (lo, hi] or hi); hi = INFINITY for no upper bound. */
int sz_opt_real(const char *opt, const char *v, double lo, int lo_open, double hi, int hi_open, float *out);
/* An optimizer name (sz_optimizer_parse: adamw, sgd). */
#include "starzero.h"
int sz_opt_optimizer(const char *opt, const char *v, sz_optimizer *out);
/* A byte size (sz_parse_bytes: 512M, 2GiB, ...), finite and >= 0. */
int sz_opt_bytes(const char *opt, const char *v, double *out);
/* Checks that a value from elsewhere (a config file) lies in the same kind of range. */
int sz_opt_check_real(const char *opt, double x, double lo, int lo_open, double hi, int hi_open);

/* The tools spell some shared options differently (sz-train --zero-stage, --config, --mem-budget,
 * --checkpoint; sz-estimate --stage, --model, --budget, --ckpt; sz-bench --zero-stage, --model,
 * --checkpoint): each tool accepts both spellings.
 * Rewrites, in place, every argument of argv[1..argc) that is the other spelling of one of `mine`
 * (NULL-terminated: the spellings this tool parses) into that one; stops at "--". */
void sz_opt_spellings(int argc, char **argv, const char *const *mine);

/* Whether `path` can be written as a file: its directory exists and takes a new file (tried by
 * creating and removing a probe beside it), and an existing file is writable. 0, or -1 and err. */
int sz_check_writable_file(const char *path, char *err, size_t errlen);
/* Whether files can be created in directory `path`, creating it (and its parents) if missing. */
int sz_check_writable_dir(const char *path, char *err, size_t errlen);

#endif
