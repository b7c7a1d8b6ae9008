/* tests/test_nccl_rule.c — the GPU collectives' decisions (tasks/nccl.c) that need no GPU to
 * check: reduce-scatter and all-gather run on the CUDA worker only while NCCL is active and on CPU
 * workers only while it is not, so no policy can send one rank's collective to MPI and another's to
 * NCCL (both would wait for good); NCCL is used only when every rank names a GPU and no two name
 * the same one (two ranks on one GPU: the host-copy path). */
#include <stdio.h>
#include <string.h>
#include "sz_comm.h"

static int failures;
#define CHECK(c, msg)                                                  \
    do {                                                               \
        if (!(c)) {                                                    \
            printf("FAILED %s:%d: %s\n", __FILE__, __LINE__, msg);    \
            failures++;                                                \
        }                                                              \
    } while (0)

int main(void)
{
    /* the placement rule: exactly one kind of worker may run the collectives */
    CHECK(sz_nccl_worker_may_run(1, 1), "CUDA worker with NCCL refused");
    CHECK(!sz_nccl_worker_may_run(0, 1), "CPU worker allowed while NCCL is active (mixed MPI/NCCL ranks hang)");
    CHECK(sz_nccl_worker_may_run(0, 0), "CPU worker refused without NCCL (host paths)");
    CHECK(!sz_nccl_worker_may_run(1, 0), "CUDA worker allowed without a communicator");
    for (int c = 0; c < 2; c++)
        CHECK(sz_nccl_worker_may_run(0, c) != sz_nccl_worker_may_run(1, c), "both or neither worker kind");

    /* the bus ids: distinct and present */
    enum { STRIDE = 16 };
    char ids[3][STRIDE];
    memset(ids, 0, sizeof ids);
    strcpy(ids[0], "0000:3b:00.0");
    strcpy(ids[1], "0000:5e:00.0");
    strcpy(ids[2], "0000:86:00.0");
    CHECK(sz_nccl_buses_distinct(&ids[0][0], 3, STRIDE), "three GPUs taken for shared");
    CHECK(sz_nccl_buses_distinct(&ids[0][0], 1, STRIDE), "one rank with a GPU refused");
    strcpy(ids[2], "0000:3b:00.0");
    CHECK(!sz_nccl_buses_distinct(&ids[0][0], 3, STRIDE), "ranks 0 and 2 on one GPU taken for distinct");
    strcpy(ids[2], "0000:86:00.0");
    ids[1][0] = 0;
    CHECK(!sz_nccl_buses_distinct(&ids[0][0], 3, STRIDE), "a rank without a GPU taken for distinct");
    memset(ids, 0, sizeof ids);
    CHECK(!sz_nccl_buses_distinct(&ids[0][0], 2, STRIDE), "no GPUs taken for distinct");

    printf("%s\n", failures ? "test_nccl_rule: FAILED" : "test_nccl_rule: ok");
    return failures ? 1 : 0;
}
