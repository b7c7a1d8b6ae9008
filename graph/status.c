/* graph/status.c — status strings, the default log sink and error-message buffers (pure C).
 * Every library message goes through a sz_log_fn so apps decide where it lands. */
#include <stdarg.h>
#include "starzero.h"
#include "sz_err.h"

const char *sz_status_string(sz_status status)
{
    switch (status) {
    case SZ_OK: return "ok";
    case SZ_ERR_INVALID: return "invalid argument or configuration";
    case SZ_ERR_NOMEM: return "out of memory";
    case SZ_ERR_IO: return "input/output error";
    case SZ_ERR_FORMAT: return "bad file format";
    case SZ_ERR_RUNTIME: return "runtime (StarPU/MPI/hwloc) error";
    case SZ_ERR_UNSUPPORTED: return "not supported by this build or hardware";
    case SZ_ERR_BUDGET: return "does not fit the memory budget";
    case SZ_ERR_STATE: return "called in the wrong phase";
    }
    return "unknown status";
}

static const char *level_name(sz_log_level level)
{
    switch (level) {
    case SZ_LOG_ERROR: return "error";
    case SZ_LOG_WARN: return "warning";
    case SZ_LOG_INFO: return "info";
    case SZ_LOG_DEBUG: return "debug";
    }
    return "log";
}

void sz_log_stderr(sz_log_level level, const char *msg, void *user)
{
    const int *rank = user;
    if (rank)
        fprintf(stderr, "[starzero r%d] %s: %s\n", *rank, level_name(level), msg);
    else
        fprintf(stderr, "[starzero] %s: %s\n", level_name(level), msg);
}

void sz_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
