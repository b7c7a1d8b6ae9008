/* tests/test_watchdog.c — StarPU's watchdog as StarZeRO arms it (sched/runtime.c, sched/deadline.c):
 * with timeout_s = 1 and no STARPU_WATCHDOG_TIMEOUT of the user's, a task that never ends (it
 * sleeps 60 s) makes the watchdog fire after 2 s; its hook says where the rank is and ends the job
 * with MPI_Abort (exit 4). tests/deadline_cli.sh runs this and checks the message and the time;
 * reaching the end of main is the failure. */
#include <stdio.h>
#include <unistd.h>
#include <starpu.h>
#include "starzero.h"

static void sleepy(void *buffers[], void *arg)
{
    (void)buffers, (void)arg;
    sleep(60);
}

static struct starpu_codelet cl = {.cpu_funcs = {sleepy}, .nbuffers = 0, .name = "sleepy"};

int main(int argc, char **argv)
{
    sz_context_config cfg;
    sz_context_config_defaults(&cfg);
    cfg.timeout_s = 1;
    sz_context *ctx = NULL;
    if (sz_context_init(&ctx, &cfg, &argc, &argv) != SZ_OK)
        return 1;
    struct starpu_task *t = starpu_task_create();
    t->cl = &cl;
    t->name = "stuck";
    if (starpu_task_submit(t) != 0)
        return 1;
    starpu_task_wait_for_all();
    fprintf(stderr, "test_watchdog: the stuck task ended and no watchdog fired\n");
    sz_context_free(ctx);
    return 1;
}
