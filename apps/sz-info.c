/* apps/sz-info.c — prints, for every MPI rank, the node topology (hwloc), this rank's core
 * share, the StarPU workers and memory nodes, and the StarPU build's features.
 * Usage: mpirun -np N sz-info */
#include <stdio.h>
#include <string.h>
#include "starzero.h"

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: [mpirun -np N] sz-info\n"
                   "Prints per rank: hwloc topology, core share, StarPU workers, memory nodes and build features.\n"
                   "StarPU's environment variables (STARPU_NCPU, STARPU_NCUDA, STARPU_SCHED, ...) apply.\n");
            return 0;
        }
    }
    sz_context *ctx = NULL;
    sz_status st = sz_context_init(&ctx, NULL, &argc, &argv);
    if (st != SZ_OK) {
        fprintf(stderr, "sz-info: could not start the runtime: %s\n", sz_status_string(st));
        return 1;
    }
    if (sz_context_rank(ctx) == 0)
        printf("StarZeRO %d.%d: %d rank(s)\n", SZ_VERSION_MAJOR, SZ_VERSION_MINOR, sz_context_world_size(ctx));
    st = sz_context_print_all(ctx, stdout);
    sz_context_free(ctx);
    return st == SZ_OK ? 0 : 1;
}
