/* tests/test_context.c — the context lifecycle on one rank: StarPU + StarPU-MPI + hwloc start,
 * the topology and runtime info are sane, the log callback receives messages, and a codelet
 * task runs and produces the right values. */
#include <stdlib.h>
#include <string.h>
#include <starpu.h>
#include "starzero.h"
#include "sz_tasks.h"
#include "starzero_starpu.h"
#include "sz_test.h"

static sz_context *ctx;
static int log_calls;

static void count_log(sz_log_level level, const char *msg, void *user)
{
    (void)level;
    (void)msg;
    CU_ASSERT_PTR_EQUAL(user, &log_calls);
    log_calls++;
}

static void test_topology(void)
{
    sz_topology t;
    CU_ASSERT_EQUAL_FATAL(sz_context_topology(ctx, &t), SZ_OK);
    CU_ASSERT(t.cores >= 1);
    CU_ASSERT(t.pus >= t.cores);
    CU_ASSERT(t.packages >= 1);
    CU_ASSERT(t.numa_nodes >= 1);
    CU_ASSERT_EQUAL(t.local_rank, 0);
    CU_ASSERT_EQUAL(t.local_size, 1);
    CU_ASSERT_EQUAL(t.first_core, 0);
    CU_ASSERT_EQUAL(t.ncores, t.cores);
    CU_ASSERT_EQUAL(sz_context_rank(ctx), 0);
    CU_ASSERT_EQUAL(sz_context_world_size(ctx), 1);
}

static void test_runtime_info(void)
{
    sz_runtime_info i;
    CU_ASSERT_EQUAL_FATAL(sz_context_runtime_info(ctx, &i), SZ_OK);
    CU_ASSERT(i.cpu_workers >= 1);
    CU_ASSERT(i.memory_nodes >= 1);
    CU_ASSERT(i.has_mpi);
    CU_ASSERT(strlen(i.sched_policy) > 0);
    CU_ASSERT(strncmp(i.starpu_version, "1.", 2) == 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    sz_context_print(ctx, f);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "workers:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "memory nodes:"));
    free(text);
}

static void test_log_callback(void)
{
    int before = log_calls;
    sz_context_log(ctx, SZ_LOG_WARN, "hello %d", 42);
    CU_ASSERT_EQUAL(log_calls, before + 1);
    sz_context_log(ctx, SZ_LOG_DEBUG, "filtered out");
    CU_ASSERT_EQUAL(log_calls, before + 1);
}

static void test_scale_task(void)
{
    enum { N = 1000 };
    float *x = malloc(N * sizeof *x); /* owned by the tensor from here on */
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    for (int i = 0; i < N; i++)
        x[i] = (float)i;
    sz_tensor *t = sz_tensor_register(x, N, SZ_DTYPE_F32, "x");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    for (int k = 0; k < 3; k++)
        CU_ASSERT_EQUAL(sz_submit_scale(t, 2.5f, "scale:test", 0), SZ_OK);
    starpu_task_wait_for_all();
    starpu_data_acquire(sz_tensor_handle(t), STARPU_R);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += x[i] != (float)i * 2.5f * 2.5f * 2.5f;
    starpu_data_release(sz_tensor_handle(t));
    CU_ASSERT_EQUAL(bad, 0);
    sz_tensor_unregister(t);
}

int main(int argc, char **argv)
{
    sz_context_config cfg;
    sz_context_config_defaults(&cfg);
    cfg.log_fn = count_log;
    cfg.log_user = &log_calls;
    cfg.log_level = SZ_LOG_WARN;
    sz_status st = sz_context_init(&ctx, &cfg, &argc, &argv);
    if (st != SZ_OK) {
        fprintf(stderr, "context init failed: %s\n", sz_status_string(st));
        return 1;
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    SZ_SUITE("context", {"topology", test_topology}, {"runtime info", test_runtime_info},
             {"log callback", test_log_callback}, {"scale task", test_scale_task});
    int rc = sz_test_run();
    sz_context_free(ctx);
    return rc;
}
