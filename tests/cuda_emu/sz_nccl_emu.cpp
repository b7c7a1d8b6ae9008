/* tests/cuda_emu/sz_nccl_emu.cpp — the NCCL of the engine's emulated build (libnccl; sz_cuda_emu.cpp
 * is the GPU): the calls tasks/nccl.c makes, over MPI between the ranks' processes, each of
 * which emulates a GPU of its own (SZ_CUDA_EMU_PCI_BUS=rank gives them distinct PCI bus ids, so the
 * engine sees one GPU per rank and starts NCCL). Grouped sends and receives are posted at once and
 * completed at ncclGroupEnd, as NCCL's group semantics allow; the device memory stays open (the
 * emulation's lock held) from ncclGroupStart to ncclGroupEnd, since MPI reads and writes it
 * meanwhile. A call first runs what its stream was given before it (sz_cuda_emu.cpp's deferred
 * streams), then communicates at once. ncclAllGather is MPI_Allgather (in place when the send
 * buffer is the rank's slot).
 * What it cannot check: NCCL's own transports, its streams' concurrency, its error paths. The
 * communicator is MPI_COMM_WORLD's (the data-parallel ranks must be all of them). */
#include <mpi.h>
#include <nccl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include "sz_cuda_emu_rt.h"

struct ncclComm {
    MPI_Comm c;
    int rank, n;
};

static int g_depth;                       /* ncclGroupStart nesting */
static std::vector<MPI_Request> g_pending; /* the group's sends and receives */
static sz_emu_device *g_open;             /* the device held open for the group */

static const char MAGIC[] = "sz-nccl-emu";

extern "C" {

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument (nccl-emu)";
    case ncclInvalidUsage: return "invalid usage (nccl-emu)";
    case ncclSystemError: return "system error: an MPI call failed (nccl-emu)";
    default: return "an error (nccl-emu)";
    }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0, sizeof *id);
    memcpy(id->internal, MAGIC, sizeof MAGIC);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    int init = 0, wr = -1, wn = 0;
    MPI_Initialized(&init);
    if (!init || memcmp(id.internal, MAGIC, sizeof MAGIC)) {
        sz_emu_error("ncclCommInitRank: %s", init ? "an id ncclGetUniqueId did not make" : "MPI is not initialised");
        return ncclInvalidUsage;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &wn);
    if (nranks != wn || rank != wr) {
        sz_emu_error("ncclCommInitRank: rank %d of %d, but MPI_COMM_WORLD rank %d of %d (the emulation needs them equal)",
                     rank, nranks, wr, wn);
        return ncclInvalidUsage;
    }
    ncclComm *c = new ncclComm{MPI_COMM_NULL, rank, nranks};
    if (MPI_Comm_dup(MPI_COMM_WORLD, &c->c) != MPI_SUCCESS) {
        delete c;
        return ncclSystemError;
    }
    *comm = c;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm)
        return ncclInvalidArgument;
    MPI_Comm_free(&comm->c);
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclGroupStart(void)
{
    if (!g_depth++)
        g_open = new sz_emu_device;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    if (g_depth <= 0) {
        sz_emu_error("ncclGroupEnd without ncclGroupStart");
        return ncclInvalidUsage;
    }
    if (--g_depth)
        return ncclSuccess;
    int rc = g_pending.empty() ? MPI_SUCCESS
                               : MPI_Waitall((int)g_pending.size(), g_pending.data(), MPI_STATUSES_IGNORE);
    g_pending.clear();
    delete g_open;
    g_open = nullptr;
    return rc == MPI_SUCCESS ? ncclSuccess : ncclSystemError;
}

static size_t type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

/* a send or a receive: posted now, completed by the (implicit or explicit) group's end */
static ncclResult_t p2p(bool send, void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
                        cudaStream_t s)
{
    size_t n = count * type_size(t);
    if (!comm || peer < 0 || peer >= comm->n || n > (size_t)INT32_MAX) {
        sz_emu_error("nccl%s: peer %d of %d, %zu bytes", send ? "Send" : "Recv", peer, comm ? comm->n : 0, n);
        return ncclInvalidArgument;
    }
    if (n && !sz_emu_in_device(buf, n)) {
        sz_emu_error("nccl%s: the buffer [%p, +%zu) is not inside one device allocation", send ? "Send" : "Recv", buf,
                     n);
        return ncclInvalidArgument;
    }
    sz_emu_flush(s); /* what the stream did before the call, done */
    ncclGroupStart();
    MPI_Request r;
    int rc = send ? MPI_Isend(buf, (int)n, MPI_BYTE, peer, 0, comm->c, &r)
                  : MPI_Irecv(buf, (int)n, MPI_BYTE, peer, 0, comm->c, &r);
    if (rc == MPI_SUCCESS)
        g_pending.push_back(r);
    ncclResult_t e = ncclGroupEnd();
    return rc == MPI_SUCCESS ? e : ncclSystemError;
}

ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t s)
{
    return p2p(true, (void *)buf, count, t, peer, comm, s);
}
ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t s)
{
    return p2p(false, buf, count, t, peer, comm, s);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t s)
{
    size_t n = count * type_size(t);
    if (!comm || n > (size_t)INT32_MAX)
        return ncclInvalidArgument;
    if (g_depth) {
        sz_emu_error("ncclAllGather inside a group: not emulated");
        return ncclInvalidUsage;
    }
    if (!sz_emu_in_device(recv, n * comm->n) || !sz_emu_in_device(send, n)) {
        sz_emu_error("ncclAllGather: a buffer outside the device allocations (%zu bytes per rank)", n);
        return ncclInvalidArgument;
    }
    sz_emu_flush(s);
    sz_emu_device open;
    bool in_place = send == (const char *)recv + n * comm->rank;
    int rc = MPI_Allgather(in_place ? MPI_IN_PLACE : send, (int)n, MPI_BYTE, recv, (int)n, MPI_BYTE, comm->c);
    return rc == MPI_SUCCESS ? ncclSuccess : ncclSystemError;
}

} /* extern "C" */
