/* tests/test_devcheck.c — the run-time device-memory check's verdict and message
 * (graph/devcheck.c), on made-up measurements: within the budget passes; StarPU's allocations on
 * the GPU's node over the budget fail, naming rank, device, node, step, the figures and what to
 * do; the device's memory in use (cudaMemGetInfo) grown past the sharing ranks' budgets plus the
 * runtime allowance fails, naming the other-process case; no budget, or unknown figures, check
 * nothing; the host-node analogue (SZ_DEVWATCH_BUDGET on a CPU-only rank) names main RAM. Pure C, no runtime, no GPU: what a GPU run would meet. */
#include <string.h>
#include "sz_test.h"
#include "sz_devcheck.h"

#define MB ((int64_t)1000000)

static sz_device_sample base(void)
{
    sz_device_sample s = {.rank = 1, .device = 0, .node = 2, .step = 3, .sharers = 1, .budget = 800 * MB,
                          .predicted = 700 * MB, .engine_peak = 700 * MB, .starpu_peak = 760 * MB,
                          .starpu_limit = 762 * MB, .cuda_start_used = 600 * MB, .cuda_used = 1500 * MB,
                          .allowance = SZ_GPU_RUNTIME_ALLOWANCE_BYTES};
    return s;
}

static void test_within(void)
{
    sz_device_sample s = base();
    char msg[1400] = "x";
    CU_ASSERT_EQUAL(sz_device_budget_check(&s, msg, sizeof msg), 0);
    CU_ASSERT_STRING_EQUAL(msg, "");
    s.starpu_peak = s.budget; /* at the budget is within it */
    CU_ASSERT_EQUAL(sz_device_budget_check(&s, msg, sizeof msg), 0);
    s.cuda_used = s.cuda_start_used + s.budget + s.allowance; /* exactly what one rank may add */
    CU_ASSERT_EQUAL(sz_device_budget_check(&s, msg, sizeof msg), 0);
}

static void test_starpu_over(void)
{
    sz_device_sample s = base();
    s.starpu_peak = 812300000; /* 812.3 MB */
    char msg[1400];
    CU_ASSERT_EQUAL(sz_device_budget_check(&s, msg, sizeof msg), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "rank 1, CUDA device 0 (StarPU memory node 2), step 3"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "reached 812.3 MB, over the per-GPU budget of 800.0 MB"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "predicted 700.0 MB"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "the other 112.3 MB are StarPU's own"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "--mem-budget of at least 812.3 MB"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "STARPU_LIMIT_CUDA_MEM to the budget in MiB (762)"));
    s.starpu_peak = s.budget + 1; /* one byte over: never printed as equal */
    CU_ASSERT_EQUAL(sz_device_budget_check(&s, msg, sizeof msg), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "reached 800.1 MB, over the per-GPU budget of 800.0 MB"));
    CU_ASSERT_EQUAL(sz_device_budget_check(&s, NULL, 0), 1); /* no message wanted */
    char small[16];
    CU_ASSERT_EQUAL(sz_device_budget_check(&s, small, sizeof small), 1); /* cut, still terminated */
    CU_ASSERT_EQUAL(strlen(small), sizeof small - 1);
}

static void test_cuda_over(void)
{
    sz_device_sample s = base();
    s.sharers = 2;
    s.cuda_used = s.cuda_start_used + 2 * (s.budget + s.allowance) + 1;
    char msg[1400];
    CU_ASSERT_EQUAL(sz_device_budget_check(&s, msg, sizeof msg), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "rank 1, CUDA device 0, step 3"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "cudaMemGetInfo, every process on it"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "the 2 rank(s) of this node driving it may add 2 x (800.0 MB budget"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "another process on the GPU (nvidia-smi lists them)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "This rank's StarPU allocations there: 760.0 MB"));
    s.sharers = 3; /* a third rank on the device: its share makes room */
    CU_ASSERT_EQUAL(sz_device_budget_check(&s, msg, sizeof msg), 0);
    s.sharers = 0; /* an unknown count is taken as one rank */
    CU_ASSERT_EQUAL(sz_device_budget_check(&s, msg, sizeof msg), 1);
}

static void test_nothing_to_check(void)
{
    sz_device_sample s = base();
    s.starpu_peak = 10 * s.budget;
    s.cuda_used = 100 * s.budget;
    s.budget = 0; /* no budget: nothing is compared */
    CU_ASSERT_EQUAL(sz_device_budget_check(&s, NULL, 0), 0);
    s = base();
    s.starpu_peak = -1; /* unknown figures are skipped, the known one still counts */
    s.cuda_start_used = -1;
    s.cuda_used = 100 * s.budget;
    CU_ASSERT_EQUAL(sz_device_budget_check(&s, NULL, 0), 0);
    s.cuda_start_used = 0;
    CU_ASSERT_EQUAL(sz_device_budget_check(&s, NULL, 0), 1);
    CU_ASSERT_EQUAL(sz_device_budget_check(NULL, NULL, 0), 0);
}

static void test_host(void)
{
    sz_device_sample s = {.rank = 0, .host = 1, .device = -1, .node = 0, .step = 1, .sharers = 1, .budget = 100000,
                          .predicted = 9 * MB, .starpu_peak = 1436928, .cuda_start_used = -1, .cuda_used = -1};
    char msg[1400];
    CU_ASSERT_EQUAL(sz_device_budget_check(&s, msg, sizeof msg), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "rank 0, main RAM (StarPU memory node 0), step 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "reached 1.5 MB, over the 0.1 MB SZ_DEVWATCH_BUDGET"));
    CU_ASSERT_PTR_NULL(strstr(msg, "CUDA device"));
    s.budget = 2 * MB;
    CU_ASSERT_EQUAL(sz_device_budget_check(&s, msg, sizeof msg), 0);
    s.cuda_start_used = 0, s.cuda_used = 100 * MB; /* the device half never applies to main RAM */
    CU_ASSERT_EQUAL(sz_device_budget_check(&s, msg, sizeof msg), 0);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    SZ_SUITE("devcheck", {"within the budget", test_within}, {"StarPU's allocations over", test_starpu_over},
             {"the device's memory over", test_cuda_over}, {"nothing to check", test_nothing_to_check},
             {"main RAM on a CPU-only rank", test_host});
    return sz_test_run();
}
