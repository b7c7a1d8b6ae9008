/* tests/test_leave.c — a library app whose rank 1 fails alone (tests/leave_cli.sh runs it under
 * mpiexec -n 2): rank 1 logs an error and frees its context at once; rank 0 goes on into a collective
 * (sz_context_sum) it will never complete. The job must end within seconds (sched/deadline.c: rank
 * 0 learns rank 1 left and stops the job, exit status SZ_PEER_LEFT_EXIT = 5, naming rank 1's
 * error), not at the collectives' deadline (600 s). With the argument "all", every rank fails
 * alike: a normal end, exit 0 on every rank. */
#include <stdio.h>
#include <string.h>
#include "starzero.h"

int main(int argc, char **argv)
{
    sz_context *ctx;
    if (sz_context_init(&ctx, NULL, &argc, &argv) != SZ_OK)
        return 1;
    int rank = sz_context_rank(ctx), all = argc > 1 && !strcmp(argv[1], "all");
    if (rank == 1 || all) {
        sz_context_log(ctx, SZ_LOG_ERROR, "test_leave: rank %d cannot open its input (made-up failure)", rank);
        sz_context_free(ctx);
        return all ? 0 : 1;
    }
    double v = 1.0;
    sz_status st = sz_context_sum(ctx, &v, 1); /* never completes: rank 1 is gone */
    printf("rank 0: the sum returned %s\n", sz_status_string(st));
    sz_context_free(ctx);
    return 0;
}
