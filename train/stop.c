/* train/stop.c — stopping a run on a signal (the first signal is recorded, the ranks agree on it
 * after each step, the app saves and exits 0; a second signal exits at once) and a barrier
 * (include/starzero_train.h). The signal state is per process, as signals are. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "starzero_train.h"

static volatile sig_atomic_t stop_signal = 0;
static char second_msg[160] = "starzero: a second signal: exiting at once, without saving\n";

static void on_signal(int sig)
{
    if (stop_signal) {
        ssize_t w = write(2, second_msg, strlen(second_msg));
        (void)w;
        _exit(128 + sig);
    }
    stop_signal = sig;
}

sz_status sz_stop_catch(const char *prog)
{
    snprintf(second_msg, sizeof second_msg, "%s: a second signal: exiting at once, without saving\n",
             prog ? prog : "starzero");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    static const int sigs[] = {SIGTERM, SIGINT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        if (sigaction(sigs[i], &sa, NULL) != 0)
            return SZ_ERR_RUNTIME;
    return SZ_OK;
}

int sz_stop_signal(void)
{
    return stop_signal;
}

int sz_stop_agree(sz_context *ctx)
{
    int mine = stop_signal, sig = 0;
    double got[65] = {0}; /* got[s]: how many ranks got signal s (a fixed size: no allocation to fail) */
    if (mine > 0 && mine < 65)
        got[mine] = 1;
    if (sz_context_sum(ctx, got, 65) == SZ_OK)
        for (int s = 1; s < 65 && !sig; s++)
            sig = got[s] > 0 ? s : 0;
    return mine ? mine : sig;
}

sz_status sz_context_barrier(sz_context *ctx)
{
    if (!ctx)
        return SZ_ERR_INVALID;
    double zero = 0;
    sz_status st = sz_context_sum(ctx, &zero, 1);
    return st == SZ_OK ? SZ_OK : SZ_ERR_RUNTIME;
}
