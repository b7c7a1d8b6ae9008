/* sched/topology.c — what the node looks like (hwloc) and which share of its cores belongs
 * to this rank. Co-located ranks split the node's cores by local rank (docs/ARCHITECTURE.md, runtime facts: ranks that
 * each bind as if they owned the machine pile onto the same cores and lose half of it). */
#include <string.h>
#include <unistd.h>
#include "sz_runtime.h"

static int count_type(hwloc_topology_t t, hwloc_obj_type_t type)
{
    int n = hwloc_get_nbobjs_by_type(t, type);
    return n < 0 ? 0 : n;
}

static int count_gpus(hwloc_topology_t t)
{
    int n = 0;
    for (hwloc_obj_t o = hwloc_get_next_osdev(t, NULL); o; o = hwloc_get_next_osdev(t, o)) {
        /* CUDA devices appear as "cudaN" co-processors, NVML ones as "nvmlN" GPUs: count CUDA only. */
        if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC && o->name && !strncmp(o->name, "cuda", 4))
            n++;
    }
    return n;
}

sz_status sz_topology_discover(struct sz_context *ctx)
{
    sz_topology *tp = &ctx->topology;
    memset(tp, 0, sizeof *tp);
    tp->packages = count_type(ctx->topo, HWLOC_OBJ_PACKAGE);
    tp->numa_nodes = count_type(ctx->topo, HWLOC_OBJ_NUMANODE);
    tp->cores = count_type(ctx->topo, HWLOC_OBJ_CORE);
    tp->pus = count_type(ctx->topo, HWLOC_OBJ_PU);
    tp->gpus = count_gpus(ctx->topo);
    if (tp->cores < 1)
        tp->cores = tp->pus > 0 ? tp->pus : 1;
    gethostname(tp->hostname, sizeof tp->hostname - 1);

    MPI_Comm node;
    if (MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        return SZ_ERR_RUNTIME;
    MPI_Comm_rank(node, &tp->local_rank);
    MPI_Comm_size(node, &tp->local_size);
    MPI_Comm_free(&node);

    /* Contiguous share [first_core, first_core + ncores); with more ranks than cores, ranks
     * share single cores round-robin. */
    if (tp->local_size <= tp->cores) {
        tp->first_core = tp->local_rank * tp->cores / tp->local_size;
        tp->ncores = (tp->local_rank + 1) * tp->cores / tp->local_size - tp->first_core;
    } else {
        tp->first_core = tp->local_rank % tp->cores;
        tp->ncores = 1;
    }
    return SZ_OK;
}
