/* tests/test_trainlib.c — the training loop's library calls (include/starzero_train.h) that need no
 * model, run under mpiexec with 1 and 2 ranks:
 *  - sz_context_barrier waits for the last rank: the last rank arrives 300 ms late, and every other
 *    rank's barrier takes at least 250 ms;
 *  - stop on a signal: after sz_stop_catch, a SIGUSR1 to the last rank alone is seen by sz_stop_agree
 *    on every rank (10, SIGUSR1), while sz_stop_signal is 0 on the others; none before it;
 *  - sz_ds_config_read: tests/ds_config_example.json gives options (--zero-stage 2 among them),
 *    a file that is not JSON is SZ_ERR_FORMAT, a missing file SZ_ERR_IO, each with the path in err;
 *  - sz_lr_kind_parse: constant, cosine, and -1 for anything else and NULL.
 * Usage: test_trainlib SOURCE_DIR */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "starzero_train.h"
#include "sz_test_ranks.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_barrier(int me, int np)
{
    CHECK(sz_context_barrier(NULL) == SZ_ERR_INVALID, "barrier(NULL) is not SZ_ERR_INVALID");
    CHECK(sz_context_barrier(ctx) == SZ_OK, "first barrier failed");
    double t0 = now_s();
    if (me == np - 1)
        usleep(300000);
    CHECK(sz_context_barrier(ctx) == SZ_OK, "barrier failed");
    double waited = now_s() - t0;
    if (me != np - 1)
        CHECK(waited >= 0.25, "rank %d left the barrier after %.3f s, before the last rank arrived (0.3 s)", me,
              waited);
}

static void test_stop(int me, int np)
{
    CHECK(sz_stop_catch("test_trainlib") == SZ_OK, "sz_stop_catch failed");
    CHECK(sz_stop_agree(ctx) == 0, "a stop agreed before any signal");
    if (me == np - 1)
        raise(SIGUSR1); /* recorded by the handler; the process goes on */
    int got = sz_stop_agree(ctx);
    CHECK(got == SIGUSR1, "rank %d: sz_stop_agree gave %d, expected SIGUSR1 (%d)", me, got, SIGUSR1);
    CHECK(sz_stop_signal() == (me == np - 1 ? SIGUSR1 : 0), "rank %d: sz_stop_signal is %d", me, sz_stop_signal());
}

static void test_ds_config(const char *src)
{
    char path[4096], err[1024];
    char **args = NULL;
    int n = 0;
    snprintf(path, sizeof path, "%s/tests/ds_config_example.json", src);
    sz_status st = sz_ds_config_read(path, 0, NULL, &args, &n, NULL, err, sizeof err);
    CHECK(st == SZ_OK && n > 0, "%s: status %d, %d options: %s", path, (int)st, n, err);
    int stage = 0;
    for (int i = 0; i + 1 < n; i++)
        if (!strcmp(args[i], "--zero-stage"))
            stage = atoi(args[i + 1]);
    CHECK(stage > 0, "%s: no --zero-stage among its options", path);
    sz_ds_args_free(args, n);

    snprintf(path, sizeof path, "%s/tests/test_trainlib.c", src); /* not JSON */
    st = sz_ds_config_read(path, 0, NULL, &args, &n, NULL, err, sizeof err);
    CHECK(st == SZ_ERR_FORMAT && args == NULL && strstr(err, path), "not JSON: status %d, err '%s'", (int)st, err);
    snprintf(path, sizeof path, "%s/tests/no-such-config.json", src);
    st = sz_ds_config_read(path, 0, NULL, &args, &n, NULL, err, sizeof err);
    CHECK(st == SZ_ERR_IO && strstr(err, path), "missing file: status %d, err '%s'", (int)st, err);
}

static void test_lr_kinds(void)
{
    CHECK(sz_lr_kind_parse("constant") == SZ_LR_CONSTANT && sz_lr_kind_parse("cosine") == SZ_LR_COSINE,
          "constant/cosine not parsed");
    CHECK(sz_lr_kind_parse("linear") == -1 && sz_lr_kind_parse(NULL) == -1, "an unknown schedule was accepted");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_trainlib SOURCE_DIR\n");
        return 2;
    }
    const char *src = argv[1];
    if (sz_context_init(&ctx, NULL, &argc, &argv) != SZ_OK)
        return 1;
    int me = sz_context_rank(ctx), np = sz_context_world_size(ctx);
    test_barrier(me, np);
    test_stop(me, np);
    test_ds_config(src);
    test_lr_kinds();
    return sz_test_finish("test_trainlib", "");
}
