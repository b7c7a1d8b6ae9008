/* tests/test_agree.c — the ranks' agreement (sched/agree.c), run under mpiexec with 2 and 3 ranks:
 * equal lists pass; a value that differs on the last rank, or a list one rank makes longer, is
 * SZ_ERR_INVALID on every rank with the same message naming the setting and each rank's value;
 * sz_model_finalize refuses on every rank when one rank's model has a unit of another size or
 * another ZeRO stage, and accepts equal models. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "starzero.h"
#include "sz_test.h"

static sz_context *ctx;
static int me, np;
static char logged[4096];

static void capture(sz_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == SZ_LOG_ERROR)
        snprintf(logged, sizeof logged, "%s", msg);
}

/* every rank got `st`, as an int all-reduced by min and max */
static int everywhere(sz_status st)
{
    double v[2] = {(double)st, -(double)st};
    double all[2] = {v[0], v[1]};
    sz_context_sum(ctx, all, 2); /* sum of st and of -st: equal st everywhere iff sum == np*st */
    return all[0] == np * (double)st && all[1] == -np * (double)st;
}

static void test_equal(void)
{
    sz_settings *s = NULL;
    CU_ASSERT_EQUAL_FATAL(sz_settings_init(&s), SZ_OK);
    sz_settings_add(s, "--batch", "%d", 4);
    sz_settings_add(s, "--lr", "%.9g", 3e-4);
    char msg[512] = "x";
    CU_ASSERT_EQUAL(sz_context_agree(ctx, s, "t", msg, sizeof msg), SZ_OK);
    CU_ASSERT_STRING_EQUAL(msg, "");
    sz_settings_free(s);
}

static void test_value_differs(void)
{
    sz_settings *s = NULL;
    CU_ASSERT_EQUAL_FATAL(sz_settings_init(&s), SZ_OK);
    sz_settings_add(s, "--batch", "%d", 4);
    sz_settings_add(s, "--seq", "%d", me == np - 1 ? 16 : 32);
    sz_settings_add(s, "--seed", "%d", me); /* differs too, but later: not the one named */
    char msg[512];
    sz_status st = sz_context_agree(ctx, s, "t", msg, sizeof msg);
    CU_ASSERT_EQUAL(st, SZ_ERR_INVALID);
    CU_ASSERT_TRUE(everywhere(st));
    const char *want = np == 2 ? "t: the ranks disagree on --seq: 32 on rank 0; 16 on rank 1"
                               : "t: the ranks disagree on --seq: 32 on ranks 0, 1; 16 on rank 2";
    CU_ASSERT_STRING_EQUAL(msg, want);
    CU_ASSERT_STRING_EQUAL(logged, want);
    if (strcmp(msg, want))
        fprintf(stderr, "rank %d got: %s\n", me, msg);
    sz_settings_free(s);
}

static void test_longer_list(void)
{
    sz_settings *s = NULL;
    CU_ASSERT_EQUAL_FATAL(sz_settings_init(&s), SZ_OK);
    sz_settings_add(s, "a", "1");
    if (me == 1)
        sz_settings_add(s, "b", "2");
    char msg[512];
    sz_status st = sz_context_agree(ctx, s, "t", msg, sizeof msg);
    CU_ASSERT_EQUAL(st, SZ_ERR_INVALID);
    CU_ASSERT_TRUE(everywhere(st));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "b = 2 on rank 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "not set"));
    sz_settings_free(s);
}

static sz_status nop(sz_unit *u, void *user)
{
    (void)u, (void)user;
    return SZ_OK;
}

/* A two-unit model; `cols` of the second unit's tensor and the stage given per rank. */
static sz_status build(int cols, int stage)
{
    sz_model *m = NULL;
    sz_status st = sz_model_init(&m, ctx);
    if (st != SZ_OK)
        return st;
    sz_zero_config z;
    sz_zero_config_defaults(&z);
    z.stage = stage;
    sz_param_spec p0[] = {{.name = "w", .rows = 4, .cols = 8, .init = SZ_INIT_NORMAL, .init_std = 0.02f}};
    sz_param_spec p1[] = {{.name = "w", .rows = 4, .cols = cols, .init = SZ_INIT_NORMAL, .init_std = 0.02f}};
    sz_unit_desc d0 = {.name = "a", .params = p0, .nparams = 1, .forward = nop, .backward = nop};
    sz_unit_desc d1 = {.name = "b", .params = p1, .nparams = 1, .forward = nop, .backward = nop};
    if ((st = sz_model_set_zero(m, &z)) == SZ_OK && (st = sz_model_add_unit(m, &d0)) == SZ_OK &&
        (st = sz_model_add_unit(m, &d1)) == SZ_OK)
        st = sz_model_finalize(m);
    sz_model_free(m);
    return st;
}

static void test_finalize(void)
{
    CU_ASSERT_EQUAL(build(8, 1), SZ_OK);
    logged[0] = 0;
    sz_status st = build(me == np - 1 ? 6 : 8, 1);
    CU_ASSERT_EQUAL(st, SZ_ERR_INVALID);
    CU_ASSERT_TRUE(everywhere(st));
    CU_ASSERT_PTR_NOT_NULL(strstr(logged, "sz_model_finalize: the ranks disagree on unit 1: b: 1 tensors, 32 elements"));
    st = build(8, me == 0 ? 2 : 3);
    CU_ASSERT_EQUAL(st, SZ_ERR_INVALID);
    CU_ASSERT_TRUE(everywhere(st));
    CU_ASSERT_PTR_NOT_NULL(strstr(logged, "the ranks disagree on the ZeRO stage: 2 on rank 0; 3 on rank"));
    if (me == 0)
        printf("finalize refused: %s\n", logged);
}

int main(int argc, char **argv)
{
    sz_context_config cfg;
    sz_context_config_defaults(&cfg);
    cfg.log_fn = capture;
    cfg.timeout_s = 60;
    if (sz_context_init(&ctx, &cfg, &argc, &argv) != SZ_OK)
        return 1;
    me = sz_context_rank(ctx);
    np = sz_context_world_size(ctx);
    if (np < 2) {
        sz_context_free(ctx);
        return 77;
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    SZ_SUITE("agree", {"equal lists", test_equal}, {"a value differs", test_value_differs},
             {"one list longer", test_longer_list}, {"sz_model_finalize", test_finalize});
    int rc = sz_test_run();
    double bad = rc;
    sz_context_sum(ctx, &bad, 1);
    sz_context_free(ctx);
    return bad ? 1 : 0;
}
