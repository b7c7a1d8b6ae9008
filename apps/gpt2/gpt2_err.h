/* apps/gpt2/gpt2_err.h — filling a caller's (char *err, size_t errlen) message buffer (err may be
 * NULL), for the GPT-2 library's pure-C functions; private to apps/gpt2 (the core's own helper is
 * not part of the public API). */
#ifndef SZ_GPT2_ERR_H
#define SZ_GPT2_ERR_H
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

static inline __attribute__((format(printf, 3, 4))) void gpt2_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
#endif
