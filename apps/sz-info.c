/* apps/sz-info.c — prints, for every MPI rank, the node topology (hwloc), this rank's core
 * share, the StarPU workers and memory nodes, and the StarPU build's features; with --codelets,
 * every codelet the engine registers and the implementations it has (cpu, cuda, opencl), read
 * from the codelets themselves (no runtime is started for that).
 * Usage: mpirun -np N sz-info | sz-info --codelets [--json] */
#include <stdio.h>
#include <string.h>
#include "starzero.h"

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            putchar('\\');
        putchar(*s);
    }
    putchar('"');
}

static int print_codelets(int json)
{
    int n = sz_codelets_count();
    if (json)
        printf("{\"codelets\": [");
    else
        printf("%-18s %-4s %-4s %-6s %-22s %s\n", "codelet", "cpu", "cuda", "opencl", "perf model", "computes");
    for (int i = 0; i < n; i++) {
        sz_codelet_desc c;
        if (sz_codelet_info(i, &c) != SZ_OK) {
            fprintf(stderr, "sz-info: codelet %d of %d could not be read\n", i, n);
            return 1;
        }
        if (json) {
            printf("%s\n  {\"name\": ", i ? "," : "");
            json_string(c.name);
            printf(", \"implementations\": [");
            const char *sep = "";
            if (c.cpu)
                printf("%s\"cpu\"", sep), sep = ", ";
            if (c.cuda)
                printf("%s\"cuda\"", sep), sep = ", ";
            if (c.opencl)
                printf("%s\"opencl\"", sep);
            printf("], \"cpu\": %d, \"cuda\": %d, \"opencl\": %d, \"perfmodel\": ", c.cpu, c.cuda, c.opencl);
            json_string(c.perfmodel);
            printf(", \"doc\": ");
            json_string(c.doc);
            printf("}");
        } else {
            printf("%-18s %-4s %-4s %-6s %-22s %s\n", c.name, c.cpu ? "yes" : "-", c.cuda ? "yes" : "-",
                   c.opencl ? "yes" : "-", c.perfmodel, c.doc);
        }
    }
    if (json)
        printf("\n]}\n");
    else
        printf("%d codelets\n", n);
    return 0;
}

int main(int argc, char **argv)
{
    int codelets = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: [mpirun -np N] sz-info\n"
                   "       sz-info --codelets [--json]\n"
                   "Prints per rank: hwloc topology, core share, StarPU workers, memory nodes and build features.\n"
                   "StarPU's environment variables (STARPU_NCPU, STARPU_NCUDA, STARPU_SCHED, ...) apply.\n"
                   "--codelets: every codelet the engine registers, with the implementations it has\n"
                   "(cpu, cuda, opencl), its perf model and what it computes; --json: as one JSON object.\n");
            return 0;
        } else if (!strcmp(argv[i], "--codelets")) {
            codelets = 1;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else {
            fprintf(stderr, "sz-info: unknown option '%s' (see sz-info --help)\n", argv[i]);
            return 2;
        }
    }
    if (json && !codelets) {
        fprintf(stderr, "sz-info: --json goes with --codelets (see sz-info --help)\n");
        return 2;
    }
    if (codelets)
        return print_codelets(json);
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
