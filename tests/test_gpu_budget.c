/* tests/test_gpu_budget.c — the per-GPU default budget's arithmetic and wording
 * (graph/gpu_budget.c), on made-up devices: the free memory split among the k ranks sharing a GPU,
 * StarPU's 90% cap applied to the device before the split, a user's STARPU_LIMIT_CUDA_MEM per
 * process, the sentence sz-train / sz-info / the plan's refusal print, and an explicit --mem-budget
 * that k ranks cannot fit refused with the figures; several GPUs per rank on made-up device lists
 * (each its own share and sharers, the sentence, the budget and the plan's peak against each). Pure C, no runtime, no GPU. */
#include <string.h>
#include "sz_test.h"
#include "sz_gpu_budget.h"

#define MIB ((int64_t)1 << 20)
#define GB ((int64_t)1000000000)

/* an H200-like device: 143771 MiB in all */
static sz_gpu_budget_info h200(int64_t free_b, int k)
{
    sz_gpu_budget_info b = {.device = 0, .sharers = k, .free_bytes = free_b, .total_bytes = 143771 * MIB};
    sz_gpu_budget_split(&b);
    return b;
}

static void test_starpu_limit(void)
{
    /* StarPU: (total / MiB) x 0.9, truncated, in MiB */
    CU_ASSERT_EQUAL(sz_gpu_starpu_default_limit(143771 * MIB), (int64_t)129393 * MIB);
    CU_ASSERT_EQUAL(sz_gpu_starpu_default_limit(1000 * MIB + 5), 900 * MIB);
    CU_ASSERT_EQUAL(sz_gpu_starpu_default_limit(0), 0);
    CU_ASSERT_EQUAL(sz_gpu_starpu_default_limit(-1), 0);
}

static void test_split(void)
{
    /* one rank, a busy GPU: the free memory (under the cap) */
    sz_gpu_budget_info b = h200(100 * GB, 1);
    CU_ASSERT_EQUAL(b.device_cap_bytes, (int64_t)129393 * MIB);
    CU_ASSERT_EQUAL(b.share_bytes, 100 * GB);
    /* two ranks on it: half each */
    b = h200(100 * GB, 2);
    CU_ASSERT_EQUAL(b.share_bytes, 50 * GB);
    /* three: rounded down, so k shares never exceed the device */
    b = h200(100 * GB + 2, 3);
    CU_ASSERT_EQUAL(b.share_bytes, (100 * GB + 2) / 3);
    CU_ASSERT(3 * b.share_bytes <= 100 * GB + 2);
    /* an idle GPU (99% free): the cap applies to the device, then the split */
    int64_t idle = 142000 * MIB;
    b = h200(idle, 1);
    CU_ASSERT_EQUAL(b.share_bytes, (int64_t)129393 * MIB);
    b = h200(idle, 2);
    CU_ASSERT_EQUAL(b.share_bytes, (int64_t)129393 * MIB / 2);
    CU_ASSERT(2 * b.share_bytes <= b.device_cap_bytes);
    /* k < 1 counts as 1; unknown free gives no default */
    b = h200(10 * GB, 0);
    CU_ASSERT_EQUAL(b.sharers, 1);
    CU_ASSERT_EQUAL(b.share_bytes, 10 * GB);
    b = h200(-1, 2);
    CU_ASSERT_EQUAL(b.share_bytes, -1);
}

static void test_process_limit(void)
{
    /* a user's STARPU_LIMIT_CUDA_MEM is per process: it bounds the share, it is not split */
    sz_gpu_budget_info b = {.device = 1, .sharers = 2, .free_bytes = 100 * GB, .total_bytes = 143771 * MIB,
                            .process_limit_bytes = 20000 * MIB};
    sz_gpu_budget_split(&b);
    CU_ASSERT_EQUAL(b.share_bytes, 20000 * MIB);
    b.process_limit_bytes = 80000 * MIB; /* above free / k: the split wins */
    sz_gpu_budget_split(&b);
    CU_ASSERT_EQUAL(b.share_bytes, 50 * GB);
}

static void test_describe(void)
{
    char msg[512];
    sz_gpu_budget_info b = h200(100 * GB, 2);
    sz_gpu_budget_describe(&b, 0, msg, sizeof msg);
    CU_ASSERT_STRING_EQUAL(msg, "budget per rank: 50.00 GB of 100.00 GB free on GPU 0 shared by 2 ranks");
    b = h200(100 * GB, 1);
    sz_gpu_budget_describe(&b, 0, msg, sizeof msg);
    CU_ASSERT_STRING_EQUAL(msg, "budget per rank: 100.00 GB of 100.00 GB free on GPU 0 shared by 1 rank");
    b = h200(142000 * MIB, 2); /* the cap named */
    sz_gpu_budget_describe(&b, 0, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "budget per rank: 67.83 GB of 148.89 GB free on GPU 0 shared by 2 ranks"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "at most StarPU's 90% of the device's 150.75 GB, 135.67 GB, split 2 ways"));
    b.process_limit_bytes = 20000 * MIB; /* the user's limit named */
    sz_gpu_budget_split(&b);
    sz_gpu_budget_describe(&b, 0, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "budget per rank: 20.97 GB of"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "the STARPU_LIMIT_CUDA_MEM set: 20.97 GB per process"));
    b = h200(100 * GB, 2); /* a given budget */
    sz_gpu_budget_describe(&b, 30 * GB, msg, sizeof msg);
    CU_ASSERT_STRING_EQUAL(msg, "budget per rank: 30.00 GB (--mem-budget) of 100.00 GB free on GPU 0 shared by 2 ranks");
    b.device = -1;
    sz_gpu_budget_describe(&b, 0, msg, sizeof msg);
    CU_ASSERT_STRING_EQUAL(msg, "budget per rank: no GPU on this rank");
}

static void test_given(void)
{
    char msg[1024] = "x";
    sz_gpu_budget_info b = h200(100 * GB, 2);
    CU_ASSERT_EQUAL(sz_gpu_budget_check_given(&b, 50 * GB, 1, msg, sizeof msg), 0); /* exactly free / k */
    CU_ASSERT_STRING_EQUAL(msg, "");
    CU_ASSERT_EQUAL(sz_gpu_budget_check_given(&b, 50 * GB + 1, 1, msg, sizeof msg), 1);
    CU_ASSERT_EQUAL(sz_gpu_budget_check_given(&b, 80 * GB, 1, msg, sizeof msg), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "--mem-budget 80.00 GB is each GPU rank's, and rank 1's CUDA device 0 is driven by 2 ranks"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "2 x 80.00 GB = 160.00 GB, more than the 100.00 GB the device gives them"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "at most 50.00 GB (that / 2)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "fewer ranks per GPU"));
    /* one rank: fine up to the free memory; the cap counts on an idle device */
    b = h200(100 * GB, 1);
    CU_ASSERT_EQUAL(sz_gpu_budget_check_given(&b, 80 * GB, 0, NULL, 0), 0);
    b = h200(142000 * MIB, 1);
    CU_ASSERT_EQUAL(sz_gpu_budget_check_given(&b, 140000 * MIB, 0, msg, sizeof msg), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "at most StarPU's 90% of the device"));
    /* nothing to check: no GPU, unknown free, no budget */
    b.device = -1;
    CU_ASSERT_EQUAL(sz_gpu_budget_check_given(&b, 1000 * GB, 0, NULL, 0), 0);
    b = h200(-1, 2);
    CU_ASSERT_EQUAL(sz_gpu_budget_check_given(&b, 1000 * GB, 0, NULL, 0), 0);
    b = h200(10 * GB, 2);
    CU_ASSERT_EQUAL(sz_gpu_budget_check_given(&b, 0, 0, NULL, 0), 0);
    CU_ASSERT_EQUAL(sz_gpu_budget_check_given(NULL, 1, 0, NULL, 0), 0);
}

/* several GPUs per rank: each device its own share, sharers counted per device, the sentence lists
 * each, an explicit budget and the plan's peak checked against each */
static void test_devices(void)
{
    /* a node of 2 ranks, 2 CUDA workers each: rank 0 drives GPUs A, B; rank 1 drives B, C (keys) */
    enum { A = 11, Bk = 22, Ck = 33 };
    int64_t all[2 * 3] = {A, Bk, -1, Bk, Ck, -1}, mine0[2] = {A, Bk}, mine1[2] = {Bk, Ck};
    int k0[2], k1[2];
    sz_gpu_budget_count_sharers(all, 2, 3, mine0, 2, k0);
    sz_gpu_budget_count_sharers(all, 2, 3, mine1, 2, k1);
    CU_ASSERT(k0[0] == 1 && k0[1] == 2 && k1[0] == 2 && k1[1] == 1);
    int one;
    int64_t none = -1;
    sz_gpu_budget_count_sharers(all, 2, 3, &none, 1, &one); /* no device: counted 1, never 0 */
    CU_ASSERT_EQUAL(one, 1);
    /* rank 0's budgets: A 100 GB free alone, B 60 GB free shared by 2 (30 each) */
    sz_gpu_budget_info b[2] = {{.device = 0, .sharers = k0[0], .free_bytes = 100 * GB, .total_bytes = 143771 * MIB},
                               {.device = 1, .sharers = k0[1], .free_bytes = 60 * GB, .total_bytes = 143771 * MIB}};
    sz_gpu_budget_split(&b[0]);
    sz_gpu_budget_split(&b[1]);
    CU_ASSERT_EQUAL(b[0].share_bytes, 100 * GB);
    CU_ASSERT_EQUAL(b[1].share_bytes, 30 * GB); /* not the first device's share: its own */
    CU_ASSERT_EQUAL(sz_gpu_budget_tightest(b, 2), 1);
    CU_ASSERT_EQUAL(sz_gpu_budget_tightest(b, 0), -1);
    char msg[1024];
    sz_gpu_budgets_describe(b, 2, 0, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "budget per rank, each of its 2 GPUs its own: 100.00 GB of 100.00 GB free on GPU 0 "
                                       "shared by 1 rank; 30.00 GB of 60.00 GB free on GPU 1 shared by 2 ranks"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "GPU 1's 30.00 GB is the smallest"));
    sz_gpu_budgets_describe(b, 1, 0, msg, sizeof msg); /* one device: the single sentence */
    CU_ASSERT_STRING_EQUAL(msg, "budget per rank: 100.00 GB of 100.00 GB free on GPU 0 shared by 1 rank");
    sz_gpu_budgets_describe(b, 2, 20 * GB, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "20.00 GB (--mem-budget) of 100.00 GB free on GPU 0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "20.00 GB (--mem-budget) of 60.00 GB free on GPU 1"));
    CU_ASSERT_PTR_NULL(strstr(msg, "smallest"));
    /* --mem-budget 40 GB fits GPU 0 but not GPU 1 (2 ranks x 40 > 60): refused naming GPU 1 */
    CU_ASSERT_EQUAL(sz_gpu_budgets_check_given(b, 2, 30 * GB, 0, msg, sizeof msg), 0);
    CU_ASSERT_EQUAL(sz_gpu_budgets_check_given(b, 2, 40 * GB, 0, msg, sizeof msg), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "CUDA device 1 is driven by 2 ranks"));
    CU_ASSERT_EQUAL(sz_gpu_budgets_check_given(b, 1, 40 * GB, 0, NULL, 0), 0); /* GPU 0 alone: fits */
    /* the plan's device peak against each: 50 GB exceeds GPU 1's share only, 120 GB both */
    CU_ASSERT_EQUAL(sz_gpu_budgets_check_peak(b, 2, 30 * GB, msg, sizeof msg), 0);
    CU_ASSERT_STRING_EQUAL(msg, "");
    CU_ASSERT_EQUAL(sz_gpu_budgets_check_peak(b, 2, 50 * GB, msg, sizeof msg), 1);
    CU_ASSERT_STRING_EQUAL(msg, "GPU 1 (30.00 GB)");
    CU_ASSERT_EQUAL(sz_gpu_budgets_check_peak(b, 2, 120 * GB, msg, sizeof msg), 2);
    CU_ASSERT_STRING_EQUAL(msg, "GPU 0 (100.00 GB), GPU 1 (30.00 GB)");
    /* a per-device process limit (STARPU_LIMIT_CUDA_<d>_MEM) bounds that device only */
    b[0].process_limit_bytes = 10000 * MIB;
    sz_gpu_budget_split(&b[0]);
    CU_ASSERT_EQUAL(b[0].share_bytes, 10000 * MIB);
    CU_ASSERT_EQUAL(b[1].share_bytes, 30 * GB);
    CU_ASSERT_EQUAL(sz_gpu_budget_tightest(b, 2), 0);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    SZ_SUITE("gpu_budget", {"StarPU's default limit", test_starpu_limit}, {"the split", test_split},
             {"a user's STARPU_LIMIT_CUDA_MEM", test_process_limit}, {"the sentence", test_describe},
             {"an explicit --mem-budget", test_given},
             {"several GPUs per rank: a budget per device", test_devices});
    return sz_test_run();
}
