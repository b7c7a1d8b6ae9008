/* graph/sz_err.h — filling a caller's (char *err, size_t errlen) message buffer, as every pure-C
 * function that can fail on user input does (err may be NULL). */
#ifndef SZ_ERR_H
#define SZ_ERR_H
#include <stddef.h>
void sz_set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#endif
